"""`python -m aiperf.boot MODULE [ARGS...]`: how the system-controller starts a local service.

Service processes log JSON lines to files and never print rich tracebacks, yet structlog
imports rich whenever it is installed: about 0.1 s of CPU, half of the shared runtime's import
cost. With nine services on two cores that is ~0.4 s of wall time before the first request,
so rich is hidden from every service that does not render with it (`NEEDS_RICH`) before
anything imports structlog. Then MODULE runs as `__main__` with ARGS. `python -m aiperf.boot --zygote ...` instead starts
the zygote (`aiperf.runtime.zygote`), which imports the services once and forks them.

A service started by a local run must not outlive it: when `AIPERF_PARENT_PID` is set, the
service asks the kernel (Linux) for SIGTERM when its parent dies, and exits at once if the parent
is already gone. SIGTERM is a graceful stop, so it stops sending load within seconds even when
the `aiperf` process was SIGKILLed.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys

PARENT_PID_ENV = "AIPERF_PARENT_PID"
_PR_SET_PDEATHSIG = 1

NEEDS_RICH = frozenset({"aiperf.records_manager.main"})
"""Services that render with rich themselves (the results table)."""


def die_with_parent(parent_pid: int) -> None:
    """Get SIGTERM when the parent process dies (Linux); exit now if it already did."""
    if sys.platform == "linux":
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        sys.exit(f"aiperf.boot: the parent process {parent_pid} is gone; not starting")


def import_structlog_without_rich() -> None:
    """Import structlog with rich hidden, then give rich back: for a process that logs through
    structlog but may render with rich later (the `aiperf` command: its progress bar, its
    dashboard). structlog's console renderer then formats exceptions as plain tracebacks, and
    the process saves rich's traceback and pretty-printer imports (~0.1 s of CPU, pygments
    included) unless it renders with them itself. No-op when structlog or rich is already
    imported."""
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # `import rich` now raises ImportError
    try:
        import structlog.dev  # noqa: F401
    finally:
        if sys.modules.get("rich", False) is None:
            del sys.modules["rich"]


def main() -> None:
    """Run the service module named by `sys.argv[1]`."""
    if len(sys.argv) < 2:
        sys.exit("usage: python -m aiperf.boot MODULE [ARGS...]")
    if parent := os.environ.get(PARENT_PID_ENV):
        die_with_parent(int(parent))
    module = sys.argv[1]
    if module not in NEEDS_RICH:  # the zygote too: it gives rich back to the children that need it
        sys.modules.setdefault("rich", None)  # type: ignore[arg-type]  # `import rich` now raises ImportError
    if module == "--zygote":  # the local launcher's forking parent of every service
        from aiperf.runtime.zygote import main as zygote_main

        zygote_main(sys.argv[2:])
    sys.argv = [module, *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
