"""Readiness probe of a PUSH return channel.

A PUSH socket with IMMEDIATE=1 queues nothing until a connection to a PULL peer is complete,
so a NOBLOCK send of a real message succeeds exactly when the return path exists. The probe
retries that send within a bounded budget; when the budget is spent it degrades open: it
logs a warning and lets the caller go on (a later blocking send still gets through once the
peer appears).
"""

from __future__ import annotations

from typing import Protocol

import anyio

from aiperf.comms.sockets import PushSocket


class WarnLog(Protocol):
    def warning(self, event: str, **kw: object) -> object: ...


async def probe_return_channel(push: PushSocket, hello: object, *, attempts: int = 100,
                               interval_s: float = 0.02, log: WarnLog | None = None) -> bool:
    """Send `hello` with NOBLOCK until it is accepted, at most `attempts` times, waiting
    `interval_s` between tries. True when it was sent; False when the budget ran out (the
    message was not sent and the caller should send it normally)."""
    for attempt in range(attempts):
        try:
            push.send_nowait(hello)
            return True
        except anyio.WouldBlock:
            if attempt + 1 < attempts:
                await anyio.sleep(interval_s)
    if log is not None:
        log.warning("comms.return_channel_unconfirmed", channel=push.codec.channel,
                    attempts=attempts, waited_s=attempts * interval_s)
    return False
