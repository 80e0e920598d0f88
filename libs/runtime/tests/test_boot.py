"""`aiperf.boot`'s helpers, each in a fresh interpreter (they act on `sys.modules`)."""

from __future__ import annotations

import subprocess
import sys

import rich  # noqa: F401  (the interpreters below import these: here so that Pants infers them)
import structlog  # noqa: F401

import aiperf.boot  # noqa: F401


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          check=True).stdout.strip()


def test_structlog_imported_without_rich_then_rich_is_back() -> None:
    out = _run("import sys\n"
               "from aiperf.boot import import_structlog_without_rich\n"
               "import_structlog_without_rich()\n"
               "import structlog.dev\n"
               "print('structlog' in sys.modules, 'rich' in sys.modules, structlog.dev.rich is None)\n"
               "import rich.console\n"
               "print(rich.console.Console is not None)\n")
    assert out.splitlines() == ["True False True", "True"]


def test_structlog_without_rich_is_a_no_op_once_rich_is_imported() -> None:
    out = _run("import rich\n"
               "from aiperf.boot import import_structlog_without_rich\n"
               "import_structlog_without_rich()\n"
               "import structlog.dev\n"
               "print(structlog.dev.rich is not None)\n")
    assert out == "True"
