"""The dispatch pool: connected workers and their credits in flight."""

from __future__ import annotations

import itertools

import anyio


class WorkerPool:
    """Workers that may be given credits, with their in-flight counts.

    `pick` returns the least-loaded worker (ties: the one assigned least recently), or the
    preferred one while it is still in the pool (sticky conversations). Not thread-safe;
    all callers run on one event loop.
    """

    def __init__(self) -> None:
        self._in_flight: dict[str, int] = {}
        self._last_pick: dict[str, int] = {}
        self._ticks = itertools.count(1)
        self._changed = anyio.Event()

    def __len__(self) -> int:
        return len(self._in_flight)

    def __contains__(self, worker_id: object) -> bool:
        return worker_id in self._in_flight

    @property
    def workers(self) -> list[str]:
        """Ids of the dispatchable workers."""
        return list(self._in_flight)

    def in_flight(self, worker_id: str) -> int:
        """Credits at `worker_id` not yet returned (0 for an unknown worker)."""
        return self._in_flight.get(worker_id, 0)

    def add(self, worker_id: str) -> bool:
        """Admit a worker; False if it was already in the pool."""
        if worker_id in self._in_flight:
            return False
        self._in_flight[worker_id] = 0
        self._last_pick[worker_id] = 0
        self._notify()
        return True

    def remove(self, worker_id: str) -> bool:
        """Take a worker out of dispatch; False if it was not in the pool. Its later returns
        are ignored by `release`."""
        if self._in_flight.pop(worker_id, None) is None:
            return False
        self._last_pick.pop(worker_id, None)
        self._notify()
        return True

    def pick(self, prefer: str | None = None) -> str | None:
        """The worker for the next credit (None: pool empty). Does not charge it."""
        if prefer is not None and prefer in self._in_flight:
            return prefer
        if not self._in_flight:
            return None
        return min(self._in_flight, key=lambda w: (self._in_flight[w], self._last_pick[w]))

    def charge(self, worker_id: str) -> None:
        """One more credit in flight at `worker_id` (must be in the pool)."""
        self._in_flight[worker_id] += 1
        self._last_pick[worker_id] = next(self._ticks)

    def release(self, worker_id: str) -> None:
        """One credit of `worker_id` came back (ignored for a worker no longer in the pool)."""
        if worker_id in self._in_flight and self._in_flight[worker_id] > 0:
            self._in_flight[worker_id] -= 1

    async def wait_changed(self) -> None:
        """Block until the next `add` or `remove`."""
        await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()
