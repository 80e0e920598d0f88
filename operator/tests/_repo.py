"""Where the repository's committed files are, for tests that compare them with generated ones
(imported as a top-level test module). Under Pants the files target `//:helm_chart` puts
`deploy/helm/...` in the sandbox root, the test's working directory; run from a checkout, the
working directory is a package folder below the root."""

from __future__ import annotations

from pathlib import Path

CHART = Path("deploy/helm/aiperf-operator")


def chart_dir() -> Path:
    """The Helm chart folder: under the working directory or one of its parents. Raises
    `FileNotFoundError` when neither holds it (a missing BUILD dependency)."""
    for base in (Path.cwd(), *Path.cwd().parents):
        if (base / CHART).is_dir():
            return base / CHART
    raise FileNotFoundError(f"{CHART} not found from {Path.cwd()}")
