"""Every option of AIPerf 0.13.0's `aiperf profile` is ours too, or refused by name (issue 25).

The oracle's `profile --help` (run from its wheel) names each option spelling, aliases and `--no-`
forms included. Each must be accepted by our `aiperf profile` parser (the same meaning: cli's
tests) or listed in `aiperf.cli.refused_flags` (one line and exit 2); none may be neither, and
the table may name nothing AIPerf does not have. The counts are printed (`-s`)."""

from __future__ import annotations

import re
from pathlib import Path

from _oracle import find_oracle

from aiperf.cli.app import build_app
from aiperf.cli.refused_flags import REFUSED_FLAGS

_ROW = re.compile(r"│ (-\S+(?: -\S+)*)\s{2,}")


def option_spellings(help_text: str) -> list[str]:
    """The option spellings of a cyclopts `--help` (rich panels): in each panel the name column
    ends where the first row's description starts; a long name list wraps inside that column."""
    names: list[str] = []
    column: int | None = None
    for line in help_text.splitlines():
        if line.startswith("╭"):
            column = None
            continue
        if not line.startswith("│ "):
            continue
        if column is None:
            match = _ROW.match(line)
            if match is None:
                continue
            column = match.end()
        names += [token for token in line[2:column].split() if token.startswith("-")]
    return list(dict.fromkeys(names))


def ours() -> set[str]:
    """Every option spelling our `aiperf profile` parser accepts."""
    profile = build_app()["profile"]
    return {n for arg in profile.assemble_argument_collection() for n in arg.names if n.startswith("-")}


def test_every_aiperf_profile_option_is_accepted_or_refused(tmp_path: Path) -> None:
    oracle = find_oracle()
    done = oracle.run("profile", "--help", cwd=tmp_path, env={"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = option_spellings(done.stdout)
    assert len(theirs) > 300 and "--url" in theirs and "--no-server-metrics" in theirs, theirs  # parsed right
    parser = ours()
    accepted = [n for n in theirs if n in parser]
    refused = [n for n in theirs if n in REFUSED_FLAGS]
    missing = [n for n in theirs if n not in accepted and n not in refused]
    print(f"AIPerf {len(theirs)} option spellings: accepted {len(accepted)}, refused {len(refused)}, "
          f"missing {len(missing)}")
    assert missing == [], f"neither accepted nor refused: {missing}"
    assert not set(accepted) & set(refused)
    stale = sorted(set(REFUSED_FLAGS) - set(theirs))
    assert stale == [], f"refused but not an AIPerf 0.13.0 option: {stale}"
