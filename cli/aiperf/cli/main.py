"""Entry point of the `aiperf` command.

Pass-through commands (`service`, `mock-server`, `dev-fakes`) are dispatched before the
cyclopts app is built; everything else goes through `app.build_app()`.
"""

from __future__ import annotations

import sys
import time

from aiperf.cli.passthrough import PASSTHROUGH

T0_WALL_NS = time.time_ns()
"""When this command started (for the start-up figure: command start to first request)."""


def main(argv: list[str] | None = None) -> int:
    """Run the `aiperf` command with `argv` (default: `sys.argv[1:]`); returns the exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args and args[0] in PASSTHROUGH:
        return PASSTHROUGH[args[0]](args[1:])
    from aiperf.cli.app import build_app

    result = build_app()(args)
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
