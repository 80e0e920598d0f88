"""A full disk under the artifact directory: the run fails with one line naming the reason,
leaves no half-written file and no results-ready marker (issue 10, item 7).

The artifact directory is a small tmpfs mounted in a private mount namespace (`unshare
--mount`, root only: CI runs as root); the script copies what the run left there to a
normal directory before the namespace goes away. The sizes make the disk fill up at different
points: while inputs.json is written, and while the records stream in.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from e2e._harness import env

from aiperf.mock_server.testing import running_mock

pytestmark = pytest.mark.slow

RUN_BOUND_S = 120


def _can_mount() -> bool:
    if os.geteuid() != 0:
        return False
    probe = subprocess.run(["unshare", "--mount", "sh", "-c", "mount -t tmpfs -o size=4k tmpfs /mnt"],
                           capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _can_mount(), reason="needs root and unshare --mount (CI runs as root)")
@pytest.mark.parametrize("size", ["48k", "400k"])
def test_a_full_disk_fails_the_run_cleanly(tmp_path: Path, size: str) -> None:
    mount, kept = tmp_path / "mnt", tmp_path / "kept"
    mount.mkdir()
    with running_mock("--ttft-ms", "1", "--itl-ms", "1", "--output-tokens", "16") as server:
        profile = shlex.join([sys.executable, "-m", "aiperf.cli", "profile", "--model", "mock", "--url",
                              server.url, "--streaming", "--concurrency", "4", "--request-count", "400",
                              "--artifact-dir", str(mount / "a")])
        script = (f"mount -t tmpfs -o size={size} tmpfs {mount} || exit 99; {profile}; rc=$?; "
                  f"cp -a {mount}/a {kept} 2>/dev/null; exit $rc")
        run = subprocess.run(["unshare", "--mount", "sh", "-c", script], env=env(), capture_output=True,
                             text=True, timeout=RUN_BOUND_S)
    lines = [line for line in run.stderr.splitlines() if line.strip() and not line.startswith("{")]
    print(f"size {size}: exit {run.returncode}; {lines}")
    assert run.returncode == 1, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    assert len(lines) == 1 and "No space left on device" in lines[0], lines
    left = sorted(p.relative_to(kept) for p in kept.rglob("*") if p.is_file())
    assert not (kept / ".aiperf_results_ready.json").exists(), left
    assert not [p for p in left if p.name.endswith(".tmp")], left
    for path in kept.rglob("*.json"):
        json.loads(path.read_text())  # whole or absent
