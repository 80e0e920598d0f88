"""Request/reply bookkeeping with deadlines that never leak a pending entry."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import anyio

R = TypeVar("R")


class AskTimeout(TimeoutError):
    """No reply to `request_id` from `target` within the deadline."""

    def __init__(self, target: str, request_id: str, timeout: float) -> None:
        self.target, self.request_id, self.timeout = target, request_id, timeout
        super().__init__(f"no reply from {target} to {request_id} within {timeout:g}s")


class _Slot(Generic[R]):
    __slots__ = ("done", "target", "value")

    def __init__(self, target: str) -> None:
        self.done = anyio.Event()
        self.target = target
        self.value: R | None = None


class PendingReplies(Generic[R]):
    """Maps request ids to waiting askers. `ask` always removes its entry, whether it got a
    reply, timed out, failed to send or was cancelled."""

    def __init__(self) -> None:
        self._slots: dict[str, _Slot[R]] = {}

    def __len__(self) -> int:
        return len(self._slots)

    async def ask(self, request_id: str, send: Callable[[], Awaitable[None]], *, target: str,
                  timeout: float) -> R:
        """Register `request_id`, run `send`, wait for `resolve`. Raises `AskTimeout`."""
        if request_id in self._slots:
            raise ValueError(f"request id {request_id} already pending")
        slot: _Slot[R] = _Slot(target)
        self._slots[request_id] = slot
        try:
            with anyio.move_on_after(timeout) as scope:
                await send()
                await slot.done.wait()
            if scope.cancelled_caught:
                raise AskTimeout(target, request_id, timeout)
            assert slot.value is not None
            return slot.value
        finally:
            self._slots.pop(request_id, None)

    def resolve(self, request_id: str, value: R, *, sender: str | None = None) -> bool:
        """Deliver a reply; False when nobody waits for it (late or unknown) or, when `sender` is
        given, when it is not the peer the request went to (a forged or confused reply)."""
        slot = self._slots.get(request_id)
        if slot is None or slot.done.is_set() or (sender is not None and sender != slot.target):
            return False
        slot.value = value
        slot.done.set()
        return True
