"""Entry point of the `aiperf` command.

Pass-through commands (`service`, `mock-server`, `dev-fakes`) are dispatched before the
cyclopts app is built; everything else goes through `app.build_app()` (`kube` after its argv
is prepared by `aiperf.cli.kube_config.prepare_kube_argv`).
"""

from __future__ import annotations

import sys
from typing import NoReturn

from aiperf.cli.clock import T0_WALL_NS  # noqa: F401  (taken now: the start of the command)


def main(argv: list[str] | None = None) -> int:
    """Run the `aiperf` command with `argv` (default: `sys.argv[1:]`); returns the exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    if (refused := _refused(args)) is not None:
        print(refused, file=sys.stderr)
        return 2
    if args and args[0] == "profile":  # first: nothing is imported before its zygote starts
        code = _profile(args, early_zygote=argv is None)
        if argv is None:  # the process's own command: its run is over, every service gone
            _exit_now(code)
        return code
    if args[:1] == ["demo"]:
        from aiperf.boot import import_structlog_without_rich

        import_structlog_without_rich()
    from aiperf.cli.passthrough import PASSTHROUGH

    if args and args[0] in PASSTHROUGH:
        return PASSTHROUGH[args[0]](args[1:])
    if args and args[0] == "kube":
        return _kube(args)
    from aiperf.cli.app import build_app

    result = build_app()(args)
    return result if isinstance(result, int) else 0


def _refused(args: list[str]) -> str | None:
    """The one-line refusal of an AIPerf flag we do not support, for the commands that take the
    benchmark flags (`profile`, `demo`, `kube profile`, `kube generate`); else None."""
    takes_flags = args[:1] in (["profile"], ["demo"]) or args[:2] in (["kube", "profile"], ["kube", "generate"])
    if not takes_flags:
        return None
    from aiperf.cli.refused_flags import refusal

    return refusal(args[1:])


def _profile(args: list[str], *, early_zygote: bool) -> int:
    """`aiperf profile ...`. `early_zygote` (the process's own command line, not an in-process
    call with its own argv): the zygote starts first, so its imports (the services' modules)
    run on another core while this process imports its own and parses the flags; whatever the
    outcome (a flag mistake, a sweep, an unreachable server), it is gone when this returns."""
    from aiperf.zygote_process import ZygoteProcess

    wanted = early_zygote and not {"--help", "-h"} & set(args)
    zygote = ZygoteProcess.start_early() if wanted else None
    try:
        from aiperf.boot import import_structlog_without_rich

        import_structlog_without_rich()  # the run's own logs never use rich tracebacks
        from aiperf.cli.profile_args import FlagError
        from aiperf.cli.sweep_options import prepare_profile_argv

        try:
            args = prepare_profile_argv(args)
        except FlagError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        from aiperf.cli.app import build_app

        result = build_app(zygote)(args)
        return result if isinstance(result, int) else 0
    finally:
        if zygote is not None:
            zygote.close()


def _exit_now(code: int) -> NoReturn:
    """End this process with `code` as interpreter shutdown would, less its teardown: the atexit
    handlers run and the standard streams are flushed, then `os._exit` (tearing down the modules
    and objects of a finished run, zmq and the event loop's included, took ~40 ms of the
    command's wall time). Only for the process's own command line, never an in-process call."""
    import atexit
    import contextlib
    import os

    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    os._exit(code)


def _kube(args: list[str]) -> int:
    """`aiperf kube ...`: argv rewritten for cyclopts first (dotted mapping flags, `--config`
    files); a flag mistake is one line and exit 2, like every other kube user error."""
    import cyclopts

    from aiperf.cli.app import build_app
    from aiperf.cli.kube_config import prepare_kube_argv
    from aiperf.cli.profile_args import FlagError

    try:
        args = prepare_kube_argv(args)
    except FlagError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        result = build_app()(args, exit_on_error=False, print_error=False)
    except cyclopts.CycloptsError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
