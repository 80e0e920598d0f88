"""Every config template AIPerf 0.13.0 ships (`aiperf/config/templates/*.yaml` in its wheel, read
from the oracle venv) passes our `aiperf config validate`, and our `aiperf config expand`
resolves it to the same runs AIPerf's own loader does (`aiperf config expand --full`): the same
variations, phases, counts, rates, concurrency, ISL/OSL distributions, datasets, endpoint, SLOs
and exports, compared value by value. A template that uses a feature we do not build is refused
with one line naming it; each such template is listed with that line in `_templates.REFUSED`
and in docs/compat.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _oracle import Oracle, comparable, find_oracle
from _templates import AIPERF_CANNOT_EXPAND, REFUSED, TEMPLATES, aiperf_reading, clean_environment

from aiperf.cli.main import main


@pytest.fixture(scope="module")
def oracle() -> Oracle:
    return find_oracle()


def _ours(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_oracle_ships_the_templates_listed_here(oracle: Oracle) -> None:
    assert sorted(p.stem for p in oracle.templates.glob("*.yaml")) == sorted(TEMPLATES)
    assert set(REFUSED) <= set(TEMPLATES) and set(AIPERF_CANNOT_EXPAND) <= set(TEMPLATES)


@pytest.mark.parametrize("name", TEMPLATES)
def test_a_template_is_read_as_aiperf_reads_it(name: str, oracle: Oracle, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = oracle.templates / f"{name}.yaml"
    clean_environment(path, monkeypatch)
    code, out, err = _ours(["config", "validate", str(path)], capsys)
    if name in REFUSED:
        assert code == 2 and out == "", (out, err)
        assert err.count("\n") == 1 and err.startswith(f"error: {path}: {REFUSED[name]}"), err
        return
    assert (code, err) == (0, ""), err
    assert out == f"{path}: ok\n"
    code, out, err = _ours(["config", "expand", str(path), "-o", "json"], capsys)
    assert code == 0, err
    ours = json.loads(out)["variations"]
    theirs = aiperf_reading(oracle, name, tmp_path)
    assert len(ours) == len(theirs)
    for mine, their in zip(ours, theirs, strict=True):
        label = their["dir_name"] if their["dir_name"] != "base" else "benchmark"
        assert mine["label"] == label
        assert comparable(mine["benchmark"]) == comparable(their["benchmark"]), label


def test_the_accepted_templates_are_counted_in_docs_compat() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "compat.md").read_text()
    accepted = len(TEMPLATES) - len(REFUSED)
    assert f"{accepted} of the {len(TEMPLATES)} templates" in text
    for name in REFUSED:
        assert f"`{name}`" in text, name
