"""The pass-through commands' light module."""

from __future__ import annotations

import subprocess
import sys

from aiperf.cli.passthrough import SERVICE_TYPES
from aiperf.messages import ServiceType


def test_service_types_are_the_messages_service_types_in_order() -> None:
    assert SERVICE_TYPES == [str(t) for t in ServiceType]


def test_help_imports_no_messages_and_no_numpy() -> None:
    """`aiperf --help` is the command's fastest path: it must not pay for msgspec's messages,
    the runtime (structlog, zmq) or numpy."""
    code = ("import sys, contextlib, io\n"
            "from aiperf.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['--help'])\n"
            "heavy = [m for m in ('aiperf.messages', 'aiperf.runtime', 'structlog', 'zmq', 'numpy') if m in sys.modules]\n"
            "print(','.join(heavy))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == ""
