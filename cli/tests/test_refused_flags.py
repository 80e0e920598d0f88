"""AIPerf 0.13 flags we do not build are refused with one line naming the flag and why (exit 2,
never a traceback, nothing started), by every command that takes the benchmark flags; the table
and docs/compat-flags.md are the same (issue 25). tests/compat/test_flag_set.py checks the table
against AIPerf's own `profile --help`."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiperf.cli.app import build_app
from aiperf.cli.main import main
from aiperf.cli.refused_flags import REFUSED, REFUSED_FLAGS, refusal, render_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "compat-flags.md"


def accepted_spellings(*command: str) -> set[str]:
    """Every option spelling our parser accepts for `aiperf COMMAND...`."""
    sub = build_app()
    for name in command:
        sub = sub[name]
    return {n for arg in sub.assemble_argument_collection() for n in arg.names if n.startswith("-")}


@pytest.mark.parametrize("spelling", sorted(REFUSED_FLAGS))
def test_a_refused_flag_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], spelling: str) -> None:
    assert main(["profile", "-m", "m", spelling, "1"]) == 2
    assert capsys.readouterr().err == f"aiperf: {spelling} is not supported: {REFUSED_FLAGS[spelling]}\n"


def test_every_command_with_the_benchmark_flags_refuses_them(capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["demo"], ["kube", "profile"], ["kube", "generate"], ["profile"]):
        assert main([*command, "--num-sessions=4"]) == 2
        assert capsys.readouterr().err == "aiperf: --num-sessions is not supported: not built yet\n"
    assert refusal(["-m", "m", "--", "--num-users"]) is None  # after `--` nothing is a flag
    assert refusal(["--goodput", "request_latency:5"]) is None


def test_no_spelling_is_both_refused_and_accepted() -> None:
    for command in (("profile",), ("demo",), ("kube", "profile"), ("kube", "generate")):
        assert not accepted_spellings(*command) & set(REFUSED_FLAGS), command
    assert sum(len(group) for group in REFUSED.values()) == len(REFUSED_FLAGS)  # each spelling once


def test_the_doc_lists_the_table() -> None:
    text = DOC.read_text()
    begin = "<!-- refused-flags: generated from cli/aiperf/cli/refused_flags.py -->\n\n"
    end = "<!-- end of refused-flags -->"
    assert begin in text and end in text
    listed = text.split(begin, 1)[1].split(end, 1)[0]
    assert listed == render_markdown(), "docs/compat-flags.md: paste aiperf.cli.refused_flags.render_markdown()"
