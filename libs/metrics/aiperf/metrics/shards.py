"""The record-processor's side of sharded aggregation (`docs/scale.md`, "Shard aggregation"):
metric records aggregated per phase where they are made, sent as one `MetricShard` per phase.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from aiperf.messages import ClientLoad, MetricRecord, MetricShard, Phase
from aiperf.metrics.aggregate import Aggregator
from aiperf.metrics.record_jsonl import record_lines


@dataclass(slots=True)
class _PhaseState:
    aggregator: Aggregator = field(default_factory=Aggregator)
    records: int = 0
    errors: int = 0
    response_errors: int = 0
    first_start_wall_ns: int = 0
    loads: dict[str, ClientLoad] = field(default_factory=dict)
    jsonl: list[bytes] = field(default_factory=list)


class ShardBuilder:
    """Takes `MetricRecord`s (any phases, in order) and hands out, per phase, one `MetricShard`
    standing for every record of that phase taken since: the records-manager that merges it
    aggregates, counts and (with `jsonl`: the records' `profile_export.jsonl` lines, rendered
    here) writes exactly what it would for those records sent as `MetricRecordBatch`es. Memory:
    the aggregator's (4-8 bytes per metric value) plus, with `jsonl`, the rendered lines."""

    def __init__(self, *, jsonl: bool) -> None:
        self._jsonl = jsonl
        self._phases: dict[Phase, _PhaseState] = {}

    @property
    def pending(self) -> dict[Phase, int]:
        """Records taken and not yet in a shard, per phase."""
        return {phase: state.records for phase, state in self._phases.items() if state.records}

    def add_batch(self, records: Sequence[MetricRecord]) -> None:
        """Take `records`, in order."""
        start = 0
        for i in range(1, len(records) + 1):  # consecutive records of one phase go together
            if i == len(records) or records[i].phase != records[start].phase:
                self._add_run(records[start:i])
                start = i

    def _add_run(self, records: Sequence[MetricRecord]) -> None:
        state = self._phases.get(records[0].phase)
        if state is None:
            state = self._phases[records[0].phase] = _PhaseState()
        state.aggregator.add_batch(records)
        state.records += len(records)
        if self._jsonl:
            state.jsonl.append(record_lines(records))
        for record in records:
            if record.error is not None:
                state.errors += 1
                state.response_errors += record.response_error
            load = record.client_load
            if load is not None:  # cumulative per worker: the newest wins, as in the records-manager
                known = state.loads.get(record.worker_id)
                if known is None or load.ticks >= known.ticks:
                    state.loads[record.worker_id] = load
            start = record.metadata.get("request_start_ns") or record.start_wall_ns
            if isinstance(start, int) and start and (not state.first_start_wall_ns or start < state.first_start_wall_ns):
                state.first_start_wall_ns = start

    def take(self, phase: Phase) -> MetricShard | None:
        """The shard of `phase`'s records taken since the last `take` of it (None: none); the
        next one starts empty."""
        state = self._phases.pop(phase, None)
        if state is None or not state.records:
            return None
        return MetricShard(phase=phase, records=state.records, shard=state.aggregator.shard(), errors=state.errors,
                           response_errors=state.response_errors, first_start_wall_ns=state.first_start_wall_ns,
                           client_loads=state.loads, jsonl=b"".join(state.jsonl))
