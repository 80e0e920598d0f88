"""`WorkerPool.pick` (a heap) picks exactly what a scan of every worker picks: least in flight,
then least recently picked, then first admitted."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from aiperf.issuing.workers import WorkerPool

OPS = st.lists(st.tuples(st.sampled_from(["add", "remove", "charge", "release", "pick"]),
                         st.integers(min_value=0, max_value=7)), max_size=300)


class ScanPool:
    """The reference: the same rules, by scanning every worker."""

    def __init__(self) -> None:
        self.in_flight: dict[str, int] = {}
        self.last: dict[str, int] = {}
        self.tick = 0

    def pick(self) -> str | None:
        if not self.in_flight:
            return None
        return min(self.in_flight, key=lambda w: (self.in_flight[w], self.last[w]))


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_pick_matches_a_full_scan(ops: list[tuple[str, int]]) -> None:
    pool, ref = WorkerPool(), ScanPool()
    for op, n in ops:
        worker = f"w{n}"
        if op == "add":
            assert pool.add(worker) == (worker not in ref.in_flight)
            if worker not in ref.in_flight:
                ref.in_flight[worker], ref.last[worker] = 0, 0
        elif op == "remove":
            assert pool.remove(worker) == (worker in ref.in_flight)
            ref.in_flight.pop(worker, None)
            ref.last.pop(worker, None)
        elif op == "charge" and worker in ref.in_flight:
            pool.charge(worker)
            ref.tick += 1
            ref.in_flight[worker] += 1
            ref.last[worker] = ref.tick
        elif op == "release":
            pool.release(worker)
            if ref.in_flight.get(worker, 0) > 0:
                ref.in_flight[worker] -= 1
        assert pool.pick() == ref.pick()
        assert len(pool) == len(ref.in_flight)
