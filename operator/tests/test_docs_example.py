"""The AIPerfJob shown in docs/operator.md is valid for the CRD and the model (docs that show a
rejected CR would be worse than none)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from aiperf.crd.validation import validate_resource

DOC = Path("docs/operator.md")


def _doc() -> Path:
    for base in (Path.cwd(), *Path.cwd().parents):
        if (base / DOC).is_file():
            return base / DOC
    raise FileNotFoundError(f"{DOC} not found from {Path.cwd()}")


def test_the_example_aiperfjob_is_valid() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", _doc().read_text(), flags=re.S)
    (job,) = (yaml.safe_load(b) for b in blocks if "kind: AIPerfJob" in b)
    assert validate_resource(job) == []
