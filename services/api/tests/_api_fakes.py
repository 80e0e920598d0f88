"""Fakes and helpers of the api tests: an event source over a memory stream, a running `Api`."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiperf.api.service import Api
from aiperf.messages import Event
from aiperf.runtime.http import granian_server


class FakeEvents:
    """The subscriber's `recv` over a memory object stream."""

    def __init__(self, receive: MemoryObjectReceiveStream[Event]) -> None:
        self._receive = receive

    async def recv(self) -> Event:
        return await self._receive.receive()


@dataclass
class Running:
    api: Api
    events: MemoryObjectSendStream[Event]
    http: aiohttp.ClientSession
    artifact_dir: Path
    dataset_dir: Path

    @property
    def base(self) -> str:
        return self.api.url

    async def feed(self, event: Event) -> None:
        """Send `event` and wait until the api applied it (no sleeping)."""
        seen = self.api.view.version
        await self.events.send(event)
        with anyio.fail_after(5):
            await self.api.view.next_change(seen)


Serving = Callable[..., AbstractAsyncContextManager[Running]]


def make_serving(tmp_path: Path) -> Serving:
    """``async with serving(kubernetes=False) as running:`` an `Api` listening on a free
    127.0.0.1 port, stopped (and checked for leaked tasks and threads) on exit."""

    @asynccontextmanager
    async def serve(*, kubernetes: bool = False, port: int = 0,
                    upload_token: str | None = None) -> AsyncIterator[Running]:
        artifact_dir, dataset_dir = tmp_path / "artifacts", tmp_path / "artifacts" / "dataset"
        dataset_dir.mkdir(parents=True)
        tasks_before = asyncio.all_tasks()
        threads_before = set(threading.enumerate())
        send, receive = anyio.create_memory_object_stream[Event]()
        api = Api(events=FakeEvents(receive), artifact_dir=artifact_dir, dataset_dir=dataset_dir,
                  compressed_dataset=kubernetes, host="127.0.0.1", port=port,
                  server_factory=granian_server, upload_token=upload_token)
        with send, receive:
            async with aiohttp.ClientSession(auto_decompress=False) as http:
                async with anyio.create_task_group() as tg:
                    await tg.start(api.run)
                    yield Running(api, send, http, artifact_dir, dataset_dir)
                    tg.cancel_scope.cancel()
        await anyio.wait_all_tasks_blocked()
        leaked_tasks = asyncio.all_tasks() - tasks_before
        assert leaked_tasks == set(), leaked_tasks
        # AnyIO's own worker pool (file reads) is the runtime's, reused and reaped by AnyIO.
        leaked = [t for t in set(threading.enumerate()) - threads_before
                  if t.is_alive() and not t.name.startswith("AnyIO worker thread")]
        assert leaked == [], leaked

    return serve
