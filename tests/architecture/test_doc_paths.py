"""The files the docs name exist: a recipe in `docs/extending.md` that names a file moved or
deleted fails here, not in the hands of the next reader."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("build-support/", "libs/", "services/", "cli/", "mock/", "operator/", "tests/", "deploy/", "docs/", "scripts/")
CODE = re.compile(r"`([^`\s]+)`")
MODULE = re.compile(r"[\w/]+\.py")
DOCS = ["docs/extending.md"]


def named(text: str) -> tuple[set[str], set[str]]:
    """The backticked repository paths in `text` (Pants targets `dir::`, `dir:name` reduced to
    their folder; a placeholder `<svc>` matches any name) and the bare module names (`client.py`)."""
    paths, modules = set(), set()
    for word in CODE.findall(text):
        path = word.split("::")[0].split(":")[0].rstrip("/,.")
        if path.startswith(ROOTS):
            paths.add(re.sub(r"<[^>]+>", "*", path))
        elif MODULE.fullmatch(word):
            modules.add(word)
    return paths, modules


def sources() -> list[str]:
    return [p.relative_to(REPO).as_posix() for root in ROOTS for p in (REPO / root).rglob("*.py")]


@pytest.mark.parametrize("doc", DOCS)
def test_every_file_a_doc_names_exists(doc: str) -> None:
    paths, modules = named((REPO / doc).read_text())
    assert paths and modules, f"{doc}: no path found, the patterns are wrong"
    missing = {p for p in paths if not any(REPO.glob(p))}
    every = sources()
    missing |= {m for m in modules if not any(s.endswith("/" + m) for s in every)}
    assert not missing, f"{doc} names files that do not exist: {sorted(missing)}"
