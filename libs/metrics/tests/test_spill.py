"""Spilled columns (`Column(spill=dir)`, `Aggregator(spill=dir)`): the same values, types and
summary as in memory, one block per column resident, no file left behind."""

from __future__ import annotations

import math
import os
import tracemalloc
from pathlib import Path

import msgspec
import numpy as np
import pytest
from conftest import streaming_record, words
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aiperf.endpoints import EndpointType, parse_response
from aiperf.messages import MetricRecord, Phase
from aiperf.metrics import Aggregator, compute_metrics
from aiperf.metrics.columns import Column

values = st.one_of(st.integers(0, 2**32 - 1), st.integers(0, 9), st.floats(-1e3, 1e12), st.just(math.nan))
ops = st.lists(st.tuples(st.sampled_from(["append", "extend", "raw_I", "raw_d", "pad"]),
                         st.lists(values, max_size=40)), max_size=40)


def _apply(col: Column, op: str, vals: list[float]) -> None:
    if op == "append":
        for v in vals:
            col.append(v)
    elif op == "extend":
        col.extend(vals)
    elif op == "raw_I":
        ints = [int(v) for v in vals if not math.isnan(v) and 0 <= v < 2**32 and v == int(v)]
        col.extend_raw("I", np.asarray(ints, np.uint32).tobytes())
    elif op == "raw_d":
        col.extend_raw("d", np.asarray(vals, np.float64).tobytes())
    else:
        col.pad(len(col) + len(vals))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops, spill_every=st.integers(1, 50), block=st.integers(1, 64))
@example(ops=[("append", [0]), ("raw_d", [])], spill_every=1, block=1)  # widened after a spill: the file rewritten
def test_a_spilled_column_holds_what_one_in_memory_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         ops: list[tuple[str, list[float]]], spill_every: int,
                                                         block: int) -> None:
    monkeypatch.setattr(Column, "SPILL", spill_every)
    monkeypatch.setattr(Column, "PENDING", 7)
    plain, spilled = Column(), Column(tmp_path)
    for op, vals in ops:
        _apply(plain, op, vals)
        _apply(spilled, op, vals)
        assert len(plain) == len(spilled)
    assert spilled.typecode == plain.data.typecode
    assert spilled.data.tobytes() == plain.data.tobytes()
    joined = [b.tobytes() for b in spilled.blocks(block)]
    assert b"".join(joined) == plain.data.tobytes()
    assert spilled.array().tobytes() == plain.array().tobytes() == plain.data.tobytes()
    assert os.listdir(tmp_path) == []  # unnamed files: nothing to clean up, even after a crash
    spilled.close()


def test_a_column_that_cannot_spill_keeps_its_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Column, "SPILL", 4)
    col = Column(tmp_path / "missing")  # no such directory: stays in memory
    col.extend([1.0, 2.0, 3.0, 4.0, 5.0])
    assert col.values().tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]


def _records(n: int) -> list[MetricRecord]:
    out = []
    for i in range(n):
        record = streaming_record(8 + i % 9, first_ms=40 + i % 5, gap_ms=1 + i % 3, credit_num=i,
                                  requested_output_tokens=16)
        out.append(compute_metrics(record, parse_response(EndpointType.CHAT, True, record), count_tokens=words))
    return out


def test_the_summary_of_a_spilled_aggregator_is_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Column, "SPILL", 100)
    records = _records(700)
    records[5] = msgspec.structs.replace(records[5], metrics={**records[5].metrics, "inter_chunk_latency": [-1.5, 2.0]})
    plain, spilled = Aggregator(), Aggregator(spill=tmp_path)
    plain.add_batch(records)
    spilled.add_batch(records[:300])
    for r in records[300:]:
        spilled.add(r)
    a = plain.summary(benchmark_duration_s=2.0, goodput={"time_to_first_token": 42.0})
    b = spilled.summary(benchmark_duration_s=2.0, goodput={"time_to_first_token": 42.0})
    assert a == b
    assert spilled.shard() == plain.shard()
    spilled.close()


def test_a_spilled_aggregator_keeps_a_block_per_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """64-token streams: the chunk gaps and the per-request values leave memory a block at a time
    (blocks of 1,024 values here, so that 3,000 requests fill several of each column)."""
    monkeypatch.setattr(Column, "SPILL", 1024)
    record = streaming_record(64, first_ms=40, gap_ms=8, requested_output_tokens=64)
    metrics = compute_metrics(record, parse_response(EndpointType.CHAT, True, record), count_tokens=words)
    copies = [msgspec.structs.replace(metrics, credit_num=i, phase=Phase.PROFILING) for i in range(6000)]
    tracemalloc.start()
    try:
        agg = Aggregator(spill=tmp_path)
        agg.add_batch(copies[:3000])
        before = tracemalloc.get_traced_memory()[0]
        agg.add_batch(copies[3000:])
        per_request = (tracemalloc.get_traced_memory()[0] - before) / 3000
    finally:
        tracemalloc.stop()
    assert per_request <= 64, per_request  # the rows (48 bytes) and a block's worth of slack
    assert agg.summary(benchmark_duration_s=1.0).metrics["inter_chunk_latency"].count == 6000 * 63
    agg.close()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=3000), data=st.data(),
       cluster=st.integers(1, 64))
def test_a_file_array_reads_what_numpy_indexing_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      values: list[int], data: st.DataObject, cluster: int) -> None:
    from aiperf.metrics.columns import FileArray

    monkeypatch.setattr(FileArray, "CLUSTER", cluster)
    arr = np.asarray(values, np.uint32)
    path = tmp_path / "a.bin"
    path.write_bytes(arr.tobytes())
    fd = os.open(path, os.O_RDONLY)
    try:
        fa = FileArray(fd, np.dtype(np.uint32), arr.size)
        i = data.draw(st.integers(0, arr.size))
        j = data.draw(st.integers(0, arr.size))
        assert fa[i:j].tolist() == arr[i:j].tolist() and fa.size == arr.size
        index = np.asarray(data.draw(st.lists(st.integers(-arr.size, arr.size - 1), max_size=200)), np.int64)
        assert fa[index].tolist() == arr[index].tolist()
        with pytest.raises(IndexError):
            fa[np.asarray([arr.size])]
    finally:
        os.close(fd)


def test_the_sweep_reads_a_spilled_gap_column_from_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows without their times that own gaps (read through the file too) and a negative gap."""
    from aiperf.metrics.columns import FileArray

    monkeypatch.setattr(Column, "SPILL", 64)
    records = _records(300)
    records[7] = msgspec.structs.replace(records[7], start_wall_ns=0)  # owns gaps, no valid start
    records[9] = msgspec.structs.replace(records[9], metrics={**records[9].metrics, "inter_chunk_latency": [3.0, -2.0]})
    plain, spilled = Aggregator(), Aggregator(spill=tmp_path)
    plain.add_batch(records)
    spilled.add_batch(records)
    reads = []
    original = FileArray.__getitem__

    def counted(self: FileArray, key: object) -> np.ndarray:
        reads.append(key)
        return original(self, key)  # type: ignore[arg-type]

    monkeypatch.setattr(FileArray, "__getitem__", counted)
    try:
        assert plain.summary(benchmark_duration_s=1.0) == spilled.summary(benchmark_duration_s=1.0)
        assert reads  # the sweep read the gaps from the file
    finally:
        spilled.close()
