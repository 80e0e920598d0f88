"""Golden YAML: the full manifests of a typical and an uneven-split run, compared exactly.

Regenerate after an intended change with `UPDATE_GOLDEN=1` and review the diff."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from aiperf.kube import build_all, to_yaml

GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.parametrize("case", ["typical", "uneven"])
def test_manifests_match_golden(case: str, request: pytest.FixtureRequest) -> None:
    settings, run_config = request.getfixturevalue(case)
    text = to_yaml(build_all(settings, run_config))
    path = GOLDEN / f"{case}.yaml"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"missing {path}: run with UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{path.name} differs: review, then regenerate with UPDATE_GOLDEN=1"


@pytest.mark.parametrize("case", ["typical", "uneven"])
def test_generation_is_deterministic(case: str, request: pytest.FixtureRequest) -> None:
    settings, run_config = request.getfixturevalue(case)
    assert to_yaml(build_all(settings, run_config)) == to_yaml(build_all(settings, run_config))


def test_yaml_loads_back_to_the_objects(uneven) -> None:
    objects = build_all(*uneven)
    text = to_yaml(objects)
    assert list(yaml.safe_load_all(text)) == objects
    assert text.count("\n---\n") == len(objects) - 1 and "&id" not in text
