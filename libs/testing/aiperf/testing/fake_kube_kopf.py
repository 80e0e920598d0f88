"""Run the real kopf machinery against a `FakeKube`, for operator tests.

    registry = kopf.OperatorRegistry()

    @kopf.on.create("example.com", "v1", "widgets", registry=registry)
    def created(spec, patch, **_):
        patch.status["phase"] = "Created"

    async with FakeKube(namespaces=["bench"]) as kube:
        kube.install_crd(WIDGET_CRD)             # or create it through the API
        async with KopfOnFakeKube(kube, registry=registry, namespaces=["bench"]):
            kube.create(widget)
            await kube.wait_until(lambda: (kube.get(...) or {}).get("status", {}).get("phase") == "Created")

kopf runs standalone (no peering) in a worker thread with its own event loop, like a separate
operator process would, and talks to the fake over HTTP; it logs in through a `@kopf.on.login`
handler added to `registry` (the fake's URL, and `token` when the fake checks RBAC). Leaving the
block stops kopf and waits for it; an error that stopped kopf early is raised there.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import aiohttp
import anyio
import kopf
from kopf._cogs.structs.credentials import Vault  # not re-exported; operator(vault=...) is public

from aiperf.testing.fake_kube import FakeKube

log = logging.getLogger("aiperf.testing.fake_kube_kopf")


def fast_settings() -> kopf.OperatorSettings:
    """kopf settings for tests: short worker idle and exit times, quick watch reconnects."""
    settings = kopf.OperatorSettings()
    settings.queueing.idle_timeout = 1.0
    settings.queueing.exit_timeout = 1.0
    settings.watching.server_timeout = 30
    settings.watching.reconnect_backoff = 0.1
    settings.posting.level = 20  # INFO and above become Events, as by default
    return settings


class KopfOnFakeKube:
    """An async context manager: kopf serves `registry` against `kube` while entered.

    `namespaces`: what kopf watches (empty with `clusterwide=True`). `token`: the bearer token
    kopf sends (by default the fake's admin token when it checks RBAC). `startup_timeout`:
    seconds to wait for kopf to be ready.
    """

    def __init__(self, kube: FakeKube, *, registry: kopf.OperatorRegistry, namespaces: Sequence[str] = (),
                 clusterwide: bool = False, settings: kopf.OperatorSettings | None = None,
                 token: str | None = None, startup_timeout: float = 20.0, memo: Any = None) -> None:
        if not namespaces and not clusterwide:
            raise ValueError("give kopf namespaces to watch, or clusterwide=True")
        self._kube, self._registry = kube, registry
        self._namespaces, self._clusterwide = list(namespaces), clusterwide
        self._settings = settings or fast_settings()
        self._token = token or (kube.admin_token if kube.rbac else None)
        self._startup_timeout, self._memo = startup_timeout, memo
        self._stop, self._ready, self._done = threading.Event(), threading.Event(), threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        default_namespace = self._namespaces[0] if self._namespaces else "default"

        def login(**_: Any) -> kopf.ConnectionInfo:
            return kopf.ConnectionInfo(server=kube.url, token=self._token,
                                       scheme="Bearer" if self._token else None,
                                       ca_path=str(kube.tls.ca) if kube.tls else None,
                                       default_namespace=default_namespace)

        kopf.on.login(registry=registry)(login)

    async def __aenter__(self) -> KopfOnFakeKube:
        self._thread = threading.Thread(target=self._main, name="kopf-on-fake-kube", daemon=True)
        self._thread.start()
        ready = await anyio.to_thread.run_sync(self._wait_ready, abandon_on_cancel=True)
        if not ready:
            await self._shutdown()
            raise TimeoutError(f"kopf did not get ready within {self._startup_timeout} s")
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self._shutdown()

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + self._startup_timeout
        while not self._ready.is_set() and not self._done.is_set() and time.monotonic() < deadline:
            self._ready.wait(0.05)
        return self._ready.is_set()

    async def _shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            await anyio.to_thread.run_sync(self._thread.join, 30.0, abandon_on_cancel=True)
            if self._thread.is_alive():
                raise TimeoutError("kopf did not stop within 30 s")
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _main(self) -> None:
        try:
            asyncio.run(self._operate())
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread in _shutdown
            self._error = exc
        finally:
            self._done.set()

    async def _operate(self) -> None:
        """kopf.operator, then what it leaves behind: a timer or handler still writing when kopf
        closed its vault makes a new HTTP session there, so those tasks are cancelled and awaited
        and the vault is closed again (else an unclosed aiohttp session leaks)."""
        vault = Vault()
        try:
            await kopf.operator(registry=self._registry, settings=self._settings, standalone=True,
                                clusterwide=self._clusterwide, namespaces=self._namespaces,
                                stop_flag=self._stop, ready_flag=self._ready, memo=self._memo, vault=vault)
        finally:
            current = asyncio.current_task()
            leftovers = [task for task in asyncio.all_tasks() if task is not current]
            for task in leftovers:
                task.cancel()
            await asyncio.gather(*leftovers, return_exceptions=True)
            await vault.close()
            await _close_sessions_left_open()


async def _close_sessions_left_open() -> None:
    """Close the aiohttp sessions of this event loop still open as kopf has stopped (a handler's
    client whose cleanup a stopping kopf cut short, an orphaned timer's): the loop ends next, and
    their sockets would be collected later with a ResourceWarning, failing whichever test runs
    then. Each one is logged at warning."""
    loop = asyncio.get_running_loop()
    for session in [o for o in gc.get_objects() if isinstance(o, aiohttp.ClientSession)]:
        if not session.closed and session._loop is loop:  # noqa: SLF001 - no public accessor
            log.warning("an aiohttp session was left open as kopf stopped: %r", session)
            await session.close()
