"""Metric records on the wire in batches: the records-manager pays its per-message cost (ZMQ
receive, frame decode, a loop turn; ~50-100 us of CPython) once per batch, not per record.

A batch never holds a record longer than `MAX_DELAY_S`. 5 ms is far below anything that reads
records as they come (progress and realtime metrics: every second; `Finalize` waits up to 30 s
for the last records, so it waits at most 5 ms more), and it is the most a SIGKILLed
record-processor loses beyond its queues (at most `MAX_RECORDS` processed records). A saturated
processor (2,000-5,000 records/s) fills 10-25 records in 5 ms; `MAX_RECORDS` (32) bounds the
frame (~32 x 1.5 KiB for a 64-token stream) and the latency of the first record of a full one.
"""

from __future__ import annotations

import math
import time
from typing import Protocol

import anyio

from aiperf.messages import MetricRecord, MetricRecordBatch

MAX_RECORDS = 32
MAX_DELAY_S = 0.005


class Sink(Protocol):
    """Where metric record batches go (a `PushSocket` in production): queued in call order."""

    async def send(self, message: object) -> None: ...


class RecordBatcher:
    """Sends the `MetricRecord`s given to `add` to `out` as `MetricRecordBatch`es, in order.

    A batch goes when it holds `max_records`, when its first record has waited `max_delay_s`
    (kept by `run`, which must be running), before a record of another phase joins it (a
    phase's last records never wait behind the next phase's), and at once on `flush` (the
    record-processor's barriers: the raw-export flush, shutdown)."""

    def __init__(self, out: Sink, *, max_records: int = MAX_RECORDS, max_delay_s: float = MAX_DELAY_S) -> None:
        self._out, self._max_records, self._max_delay_s = out, max_records, max_delay_s
        self._pending: list[MetricRecord] = []
        self._due = math.inf
        self._started = anyio.Event()

    @property
    def pending(self) -> int:
        """Records waiting in the current batch."""
        return len(self._pending)

    async def add(self, record: MetricRecord) -> None:
        """Append `record`; sends the batch when this fills it (or when `record` starts a new phase,
        the batch before it first)."""
        if self._pending and self._pending[-1].phase != record.phase:
            await self.flush()
        pending = self._pending
        pending.append(record)
        if len(pending) == 1:
            self._due = time.monotonic() + self._max_delay_s
            self._started.set()
        if len(pending) >= self._max_records:
            await self.flush()

    async def flush(self) -> None:
        """Send the current batch now (nothing when it is empty)."""
        if not self._pending:
            return
        batch, self._pending, self._due = MetricRecordBatch(records=self._pending), [], math.inf
        await self._out.send(batch)

    async def run(self) -> None:
        """Send each batch once its first record has waited `max_delay_s`; until cancelled."""
        while True:
            await self._started.wait()
            self._started = anyio.Event()
            while self._pending:
                wait = self._due - time.monotonic()
                if wait > 0:
                    await anyio.sleep(wait)
                else:
                    await self.flush()
