"""The event-bus-proxy service: the XSUB/XPUB proxy every broadcast goes through."""

from __future__ import annotations

import anyio
from anyio.abc import TaskStatus

from aiperf.comms import EventBusProxy


class EventBusProxyService:
    """Runs the proxy until cancelled; stopping it goes through the proxy's control socket."""

    def __init__(self, *, proxy: EventBusProxy) -> None:
        self._proxy = proxy

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Bound and proxying when started; returns after the proxy thread has ended."""
        await self._proxy.run(task_status=task_status)
