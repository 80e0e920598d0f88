"""`aiperf.runtime.limits`, in child processes started with a low open-file limit (the test
process's own limit is left alone)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

CHILD = """
import resource, sys
from aiperf.runtime import UserError
from aiperf.runtime.limits import ensure_open_files, raise_open_files_limit
print(*raise_open_files_limit())
try:
    print(ensure_open_files(int(sys.argv[1]), hint="add workers"))
except UserError as exc:
    print("UserError:", exc)
"""


def _run(connections: int, soft: int, hard: int) -> list[str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    out = subprocess.run([sys.executable, "-c", CHILD, str(connections)], env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, preexec_fn=limit,
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.splitlines()


def test_the_soft_limit_rises_to_the_hard_one() -> None:
    assert _run(100, 256, 2048) == ["2048 2048", "2048"]


def test_a_hard_limit_too_low_is_one_clear_line() -> None:
    raised, error = _run(5000, 256, 1024)
    assert raised == "1024 1024"
    assert error.startswith("UserError: 5000 connections need about 5256 open files in this process, "
                            "but the open-file limit is 1024 (hard limit 1024): raise it")
    assert error.endswith("or add workers") and "\n" not in error
