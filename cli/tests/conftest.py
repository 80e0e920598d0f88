"""Fixtures of the CLI tests: the fake API server, and `aiperf ...` run in-process.

Helpers are fixtures: pytest does not put this folder on sys.path for conftest imports."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import anyio
import pytest

from aiperf.cli.main import main
from aiperf.testing.fake_kube import FakeKube

NS = "bench"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def kube() -> AsyncIterator[FakeKube]:
    """A fake API server with namespace `bench` (the kubeconfig's default namespace is not set)."""
    async with FakeKube(namespaces=[NS]) as fake:
        yield fake


@dataclass(frozen=True)
class Result:
    """What one `aiperf ...` invocation did."""

    code: int
    out: str
    err: str


@pytest.fixture
def aiperf(capsys: pytest.CaptureFixture[str]) -> Callable[..., Awaitable[Result]]:
    """`await aiperf("kube", "list", ...)`: `aiperf.cli.main.main` in a worker thread (it runs
    its own event loop, while the fake API server serves on the test's), with its output."""

    async def run(*argv: str) -> Result:
        capsys.readouterr()
        code = await anyio.to_thread.run_sync(main, list(argv))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run
