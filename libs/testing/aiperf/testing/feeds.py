"""Feeds of synthetic records into a real record-processor or records-manager: the pushing side
of `raw_records` (what workers send) and of `records` (what record-processors send)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import anyio
import orjson
import structlog
import zmq.asyncio
from anyio.abc import TaskStatus

from aiperf.comms import Addressing, Channel, PushSocket
from aiperf.messages import MetricRecord, MetricRecordBatch, Phase, RequestRecord

log = structlog.get_logger("aiperf.testing")

MS = 1_000_000


def streamed_chat_record(num: int, *, worker_id: str, conversation_id: str, phase: Phase = Phase.PROFILING,
                         words: int = 4, ttft_ms: int = 20, itl_ms: int = 5, input_tokens: int = 32,
                         model: str = "mock-model") -> RequestRecord:
    """The `RequestRecord` of one successful streamed chat completion that just ended: `words`
    content events (`ttft_ms` after the start, then `itl_ms` apart) and `[DONE]`, as a worker
    pushes it."""
    chunks = [b"data: " + orjson.dumps({"choices": [{"delta": {"content": f"w{i} "}}]}) + b"\n\n"
              for i in range(words)] + [b"data: [DONE]\n\n"]
    end_ns = time.perf_counter_ns()
    start_ns = end_ns - (ttft_ms + itl_ms * words) * MS
    chunk_ns = [start_ns + (ttft_ms + itl_ms * i) * MS for i in range(words)] + [end_ns]
    return RequestRecord(
        worker_id=worker_id, phase=phase, credit_num=num, conversation_id=conversation_id, model=model,
        endpoint="/v1/chat/completions", streaming=True, input_tokens=input_tokens,
        credit_issued_ns=start_ns - MS, credit_received_ns=start_ns - MS // 2, start_ns=start_ns,
        start_wall_ns=time.time_ns() - (end_ns - start_ns), response_headers_ns=start_ns + MS,
        end_ns=end_ns, status=200, chunk_ns=chunk_ns, chunks=chunks)


def metric_record_of(record: RequestRecord, *, processor_id: str) -> MetricRecord:
    """The `MetricRecord` a record-processor makes of `record` (tokens counted as words)."""
    # imported here: only the records-manager's fakes pay for numpy and the parsers
    from aiperf.endpoints import EndpointType, parse_response
    from aiperf.metrics import compute_metrics

    parsed = parse_response(EndpointType.CHAT, record.streaming, record)
    return compute_metrics(record, parsed, count_tokens=lambda text: len(text.split()),
                           processor_id=processor_id)


@dataclass
class RawRecordFeed:
    """Plays the workers of a record-processor's group: a PUSH connected to the `raw_records`
    endpoint of `record-processor-<index>` (an `index` of `g0-0` is record-processor-g0-0)."""

    ctx: zmq.asyncio.Context
    addressing: Addressing
    index: str = "g0-0"
    worker_id: str = "worker-g0-0"
    conversation_ids: list[str] = field(default_factory=lambda: ["session_000000"])
    pushed: int = 0
    _push: PushSocket | None = None

    async def run(self, *, task_status: TaskStatus[RawRecordFeed] = anyio.TASK_STATUS_IGNORED) -> None:
        """Connect, then hold the socket until cancelled."""
        async with PushSocket(self.ctx, channel="raw_records",
                              connect=[self.addressing.ipc(Channel.RAW_RECORDS, index=self.index)]) as push:
            self._push = push
            task_status.started(self)
            await anyio.sleep_forever()

    async def push(self, count: int) -> None:
        """Push `count` streamed chat records, numbered on from the last push."""
        assert self._push is not None, "push before run"
        for _ in range(count):
            num = self.pushed
            record = streamed_chat_record(num, worker_id=self.worker_id,
                                          conversation_id=self.conversation_ids[num % len(self.conversation_ids)])
            await self._push.send(record)
            self.pushed += 1
            log.info("fake_worker.raw_record_pushed", num=num, chunks=len(record.chunks))


@dataclass
class MetricRecordFeed:
    """Plays the record-processors: a PUSH connected to the records-manager's `records`."""

    ctx: zmq.asyncio.Context
    addressing: Addressing
    processor_id: str = "record-processor-g0-0"
    worker_id: str = "worker-g0-0"
    conversation_ids: list[str] = field(default_factory=lambda: ["session_000000"])
    pushed: int = 0
    _push: PushSocket | None = None

    async def run(self, *, task_status: TaskStatus[MetricRecordFeed] = anyio.TASK_STATUS_IGNORED) -> None:
        """Connect, then hold the socket until cancelled."""
        async with PushSocket(self.ctx, channel="records",
                              connect=[self.addressing.connect_endpoint(Channel.RECORDS)]) as push:
            self._push = push
            task_status.started(self)
            await anyio.sleep_forever()

    async def push(self, count: int, *, phase: Phase = Phase.PROFILING) -> None:
        """Push the metric records of `count` successful requests of `phase`."""
        assert self._push is not None, "push before run"
        for _ in range(count):
            num = self.pushed
            raw = streamed_chat_record(num, worker_id=self.worker_id, phase=phase,
                                       conversation_id=self.conversation_ids[num % len(self.conversation_ids)])
            record = metric_record_of(raw, processor_id=self.processor_id)
            await self._push.send(MetricRecordBatch(records=[record]))
            self.pushed += 1
            log.info("fake_rp.metric_record_pushed", num=num, phase=str(phase), metrics=len(record.metrics))
