"""`RecordBatcher`: batches go out when full, when their first record is due, before another
phase's records, and on `flush`; records keep their order."""

from __future__ import annotations

import anyio
import pytest

from aiperf.messages import MetricRecord, MetricRecordBatch, Phase
from aiperf.record_processor.batching import RecordBatcher

pytestmark = pytest.mark.anyio


class Sent:
    """Sink on a memory stream of batches."""

    def __init__(self) -> None:
        self.tx, self.rx = anyio.create_memory_object_stream[MetricRecordBatch](100)

    async def send(self, message: object) -> None:
        assert isinstance(message, MetricRecordBatch)
        await self.tx.send(message)

    def __enter__(self) -> Sent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.tx.close()
        self.rx.close()

    def now(self) -> list[list[int]]:
        """Credit numbers of each batch sent so far."""
        out = []
        while True:
            try:
                out.append([r.credit_num for r in self.rx.receive_nowait().records])
            except anyio.WouldBlock:
                return out


def rec(num: int, phase: Phase = Phase.PROFILING) -> MetricRecord:
    return MetricRecord(phase=phase, credit_num=num, worker_id="w", conversation_id="c")


async def test_full_batches_go_at_once_in_order_and_flush_sends_the_rest() -> None:
    with Sent() as sent:
        batcher = RecordBatcher(sent, max_records=3, max_delay_s=3600)
        async with anyio.create_task_group() as tg:
            tg.start_soon(batcher.run)
            for num in range(7):
                await batcher.add(rec(num))
            assert sent.now() == [[0, 1, 2], [3, 4, 5]]
            assert batcher.pending == 1
            await batcher.flush()
            await batcher.flush()  # nothing left: nothing sent
            assert sent.now() == [[6]]
            tg.cancel_scope.cancel()


async def test_a_batch_goes_when_its_first_record_is_due() -> None:
    with Sent() as sent:
        batcher = RecordBatcher(sent, max_records=32, max_delay_s=0.05)
        async with anyio.create_task_group() as tg:
            tg.start_soon(batcher.run)
            await batcher.add(rec(0))
            await batcher.add(rec(1))
            assert sent.now() == []  # not due yet
            with anyio.fail_after(10):
                first = await sent.rx.receive()
            assert [r.credit_num for r in first.records] == [0, 1]
            await batcher.add(rec(2))  # the timer keeps going for the next batch
            with anyio.fail_after(10):
                second = await sent.rx.receive()
            assert [r.credit_num for r in second.records] == [2]
            tg.cancel_scope.cancel()


async def test_a_new_phase_sends_the_previous_phase_batch_first() -> None:
    with Sent() as sent:
        batcher = RecordBatcher(sent, max_records=32, max_delay_s=3600)
        await batcher.add(rec(0, Phase.WARMUP))
        await batcher.add(rec(1, Phase.WARMUP))
        assert sent.now() == []
        await batcher.add(rec(2))
        assert sent.now() == [[0, 1]]
        assert batcher.pending == 1
