"""What every `aiperf kube` command shares: exit codes, the one-line error, the guard that turns
our errors into exit codes, the event loop of a command, the cluster session, output files.

Every command returns its exit code: 0 done, 1 the cluster or the run failed, 2 a user mistake
(bad flag, missing namespace or kubeconfig, a secret without a Secret mapping). Errors are one
line on stderr, `error: <message>`; tracebacks are for our bugs only. Commands that talk to the
API server run their own event loop (`run_async`), so they block until done.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from aiperf.cli.kube_options import KubeTarget
from aiperf.cli.profile_args import FlagError
from aiperf.config import ConfigError
from aiperf.kube import KubeConfigError
from aiperf.kubeapi import KubeApi, KubeClusterError, KubeError, connect, context_namespace, resolve_namespace

EXIT_OK, EXIT_FAILED, EXIT_USER_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130


def error(message: str) -> None:
    """Print `error: <message>` on stderr (one line)."""
    print(f"error: {message}", file=sys.stderr)


def guarded(work: Callable[[], int]) -> int:
    """Run `work` and map the errors of a kube command to one line and an exit code: FlagError,
    ConfigError, KubeConfigError and KubeError exit 2; KubeClusterError exits 1. Other exceptions
    propagate (they are bugs, and keep their traceback)."""
    try:
        return work()
    except KubeClusterError as exc:
        error(str(exc))
        return EXIT_FAILED
    except (FlagError, ConfigError, KubeConfigError, KubeError) as exc:
        error(str(exc))
        return EXIT_USER_ERROR


def run_async(work: Callable[[], Awaitable[int]]) -> int:
    """`guarded(anyio.run(work))`: a command body that talks to the API server."""
    return guarded(lambda: anyio.run(work))


@asynccontextmanager
async def session(target: KubeTarget) -> AsyncIterator[tuple[KubeApi, str]]:
    """An API client and the namespace (--namespace, else the context's, else default), closed
    on exit. KubeError for a missing kubeconfig or unknown context."""
    async with await connect(target.kubeconfig, target.kube_context) as api:
        yield api, resolve_namespace(target.namespace, target.kubeconfig, target.kube_context)


def offline_namespace(target: KubeTarget) -> str:
    """The namespace without asking the API server: --namespace, else the kubeconfig context's
    namespace, else `default`. A missing kubeconfig only matters when --kubeconfig names it."""
    if target.namespace:
        return target.namespace
    try:
        return context_namespace(target.kubeconfig, target.kube_context) or "default"
    except KubeError:
        if target.kubeconfig is not None or target.kube_context is not None:
            raise
        return "default"


def write_output(text: str, output: str | None) -> int:
    """Print `text`, or write it to the file `output` (FlagError naming `--output` when it
    cannot be written); EXIT_OK."""
    if output is None:
        sys.stdout.write(text)
        return EXIT_OK
    try:
        Path(output).write_text(text)
    except OSError as exc:
        raise FlagError(f"--output {output}: {exc.strerror}") from None
    print(f"wrote {output}", file=sys.stderr)
    return EXIT_OK


def interruptible(work: Callable[[], int], message: str) -> int:
    """`work()`, and on Ctrl-C `message` on stderr and exit 130 (the run goes on)."""
    try:
        return work()
    except KeyboardInterrupt:  # pragma: no cover - interactive
        print(f"\n{message}", file=sys.stderr)
        return EXIT_INTERRUPTED


__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USER_ERROR", "error", "guarded", "interruptible",
           "offline_namespace", "run_async", "session", "write_output"]
