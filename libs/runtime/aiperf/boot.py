"""`python -m aiperf.boot MODULE [ARGS...]`: how the system-controller starts a local service.

Service processes log JSON lines to files and never print rich tracebacks, yet structlog
imports rich whenever it is installed: about 0.1 s of CPU, half of the shared runtime's import
cost. With nine services on two cores that is ~0.4 s of wall time before the first request,
so rich is hidden from every service that does not render with it (`NEEDS_RICH`) before
anything imports structlog. Then MODULE runs as `__main__` with ARGS.
"""

from __future__ import annotations

import runpy
import sys

NEEDS_RICH = frozenset({"aiperf.records_manager.main"})
"""Services that render with rich themselves (the results table)."""


def main() -> None:
    """Run the service module named by `sys.argv[1]`."""
    if len(sys.argv) < 2:
        sys.exit("usage: python -m aiperf.boot MODULE [ARGS...]")
    module = sys.argv[1]
    if module not in NEEDS_RICH:
        sys.modules.setdefault("rich", None)  # type: ignore[arg-type]  # `import rich` now raises ImportError
    sys.argv = [module, *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
