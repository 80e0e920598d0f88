"""Property: over any history of writes (create, phase change, completion, delete, with
retention trimming), the index kept incrementally equals the index rebuilt from the disk."""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aiperf.results import disk
from aiperf.results.index import ResultsIndex

EPOCHS = ["1700000000000001", "1700000000000002", "1700000100", "1699999999123456", "1700000200000000"]
JOBS = [("bench", "a"), ("bench", "b"), ("other", "a")]
PHASES = ["Pending", "Initializing", "Running", "Failed", "Cancelled"]

operation = st.one_of(
    st.tuples(st.just("create"), st.sampled_from(JOBS), st.sampled_from(EPOCHS)),
    st.tuples(st.just("phase"), st.sampled_from(JOBS), st.sampled_from(EPOCHS), st.sampled_from(PHASES)),
    st.tuples(st.just("complete"), st.sampled_from(JOBS), st.sampled_from(EPOCHS), st.integers(0, 3)),
    st.tuples(st.just("delete"), st.sampled_from(JOBS), st.sampled_from(EPOCHS)),
)


async def _apply(index: ResultsIndex, history: list[tuple]) -> None:  # type: ignore[type-arg]
    for op in history:
        kind, (ns, name), epoch = op[0], op[1], op[2]
        uid = f"uid-{epoch}"
        if kind == "create":
            await index.record_created(ns, name, epoch, uid=uid, created_at=f"created-{epoch}")
        elif kind == "phase":
            await index.record_phase(ns, name, epoch, uid=uid, phase=op[3])
        elif kind == "complete":
            staging = await index.stage(ns, name, epoch)
            for n in range(op[3]):
                (staging / f"file{n}.json").write_bytes(b"x" * n)
            await index.record_completed(ns, name, epoch, uid=uid, staging=staging, created_at=None,
                                         completed_at=f"done-{epoch}")
        else:
            await index.record_deleted(ns, name, epoch)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example([("phase", ("bench", "b"), "1700000100", "Failed"), ("complete", ("bench", "b"), "1700000000000001", 0),
          ("phase", ("bench", "b"), "1700000000000002", "Failed")], 1)  # failures alone must be trimmed too
@given(st.lists(operation, max_size=25), st.integers(1, 3))
def test_the_rebuilt_index_equals_the_incremental_one(history: list[tuple], keep: int) -> None:  # type: ignore[type-arg]
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)

        async def check() -> None:
            incremental = ResultsIndex(base, keep=keep)
            await _apply(incremental, history)
            kept = await incremental.dump()
            (base / disk.INDEX_FILE).unlink(missing_ok=True)
            rebuilt = await ResultsIndex(base, keep=keep).dump()
            assert rebuilt == kept
            for ns, name in JOBS:  # retention held: at most `keep` finished runs per job
                finished = [r for r in kept[0] if (r.namespace, r.name) == (ns, name)
                            and r.phase in ("Completed", "Failed", "Cancelled")]
                assert len(finished) <= keep + 1  # + the protected just-written run

        anyio.run(check)
