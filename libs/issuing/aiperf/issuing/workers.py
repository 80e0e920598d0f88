"""The dispatch pool: connected workers and their credits in flight."""

from __future__ import annotations

import heapq
import itertools

import anyio


class WorkerPool:
    """Workers that may be given credits, with their in-flight counts.

    `pick` returns the least-loaded worker (ties: the one assigned least recently, then the
    one admitted first), or the preferred one while it is still in the pool (sticky
    conversations), in O(log n): a heap of (in flight, last pick, admission, id) entries, one
    pushed per change, stale ones dropped when they reach the top (a scan of every worker per
    credit was the timing-manager's largest cost with 100 workers). Not thread-safe; all
    callers run on one event loop.
    """

    def __init__(self) -> None:
        self._in_flight: dict[str, int] = {}
        self._last_pick: dict[str, int] = {}
        self._admitted: dict[str, int] = {}
        self._ticks = itertools.count(1)
        self._admissions = itertools.count()
        self._heap: list[tuple[int, int, int, str]] = []
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
        self._admitted[worker_id] = next(self._admissions)
        self._push(worker_id)
        self._notify()
        return True

    def remove(self, worker_id: str) -> bool:
        """Take a worker out of dispatch; False if it was not in the pool. Its later returns
        are ignored by `release`."""
        if self._in_flight.pop(worker_id, None) is None:
            return False
        self._last_pick.pop(worker_id, None)
        self._admitted.pop(worker_id, None)
        self._notify()
        return True

    def pick(self, prefer: str | None = None) -> str | None:
        """The worker for the next credit (None: pool empty). Does not charge it."""
        if prefer is not None and prefer in self._in_flight:
            return prefer
        if not self._in_flight:
            return None
        heap = self._heap
        while True:
            in_flight, last_pick, admitted, worker = heap[0]
            if (self._in_flight.get(worker) == in_flight and self._last_pick[worker] == last_pick
                    and self._admitted[worker] == admitted):
                return worker
            heapq.heappop(heap)  # stale: the worker changed since, or left

    def charge(self, worker_id: str) -> None:
        """One more credit in flight at `worker_id` (must be in the pool)."""
        self._in_flight[worker_id] += 1
        self._last_pick[worker_id] = next(self._ticks)
        self._push(worker_id)

    def release(self, worker_id: str) -> None:
        """One credit of `worker_id` came back (ignored for a worker no longer in the pool)."""
        if worker_id in self._in_flight and self._in_flight[worker_id] > 0:
            self._in_flight[worker_id] -= 1
            self._push(worker_id)

    def _push(self, worker_id: str) -> None:
        if len(self._heap) > 4 * len(self._in_flight) + 64:  # mostly stale entries: rebuild
            self._heap = [(n, self._last_pick[w], self._admitted[w], w) for w, n in self._in_flight.items()]
            heapq.heapify(self._heap)
            return
        heapq.heappush(self._heap, (self._in_flight[worker_id], self._last_pick[worker_id],
                                    self._admitted[worker_id], worker_id))

    async def wait_changed(self) -> None:
        """Block until the next `add` or `remove`."""
        await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()
