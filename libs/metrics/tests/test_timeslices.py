"""Time-sliced exports (`artifacts.slice_duration`): AIPerf's grid, windows and file shapes."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from aiperf.messages import ErrorDetails, MetricRecord, Phase
from aiperf.metrics.timeslices import CSV_NAME, JSON_NAME, TimesliceRecords, timeslices_csv, write_timeslices

S = 1_000_000_000
MS = 1_000_000
T0 = 1_700_000_000 * S


def _rec(start_s: float, latency_ms: float, phase: Phase = Phase.PROFILING,
         error: ErrorDetails | None = None) -> MetricRecord:
    start = T0 + int(start_s * S)
    return MetricRecord(phase=phase, credit_num=0, worker_id="w", conversation_id="c",
                        start_wall_ns=start, end_wall_ns=start + int(latency_ms * MS), error=error,
                        metrics={} if error else {"request_latency": latency_ms * MS, "output_sequence_length": 10})


def test_records_fall_in_windows_of_their_start_from_the_first_start() -> None:
    slices = TimesliceRecords(2.0)
    latencies = {0.0: 100, 0.5: 300, 1.9: 50, 2.0: 70, 5.5: 20}
    slices.add_batch([_rec(t, ms) for t, ms in latencies.items()])
    slices.add_batch([_rec(0.1, 999, phase=Phase.WARMUP)])  # warmup never counts
    got = slices.slices()
    # windows [0,2) [2,4) [4,6): [2,4) holds 2.0, [4,6) 5.5; last ends at 5.52 (the last end)
    assert [(ts.start_ns - T0, ts.end_ns - T0) for ts in got] == [(0, 2 * S), (2 * S, 4 * S),
                                                                   (4 * S, int(5.52 * S))]
    assert [ts.is_complete for ts in got] == [True, True, False]
    first = got[0].summary
    assert first.request_count == 3
    lat = first.metrics["request_latency"]
    assert lat.avg == pytest.approx(np.mean([100, 300, 50]))
    assert lat.p50 == pytest.approx(np.percentile([100, 300, 50], 50))
    # throughput over the window's length
    assert first.metrics["request_throughput"].avg == pytest.approx(3 / 2.0)
    assert got[2].summary.metrics["request_throughput"].avg == pytest.approx(1 / 1.52)


def test_empty_windows_are_left_out_and_errors_count_in_their_window() -> None:
    slices = TimesliceRecords(1.0)
    slices.add_batch([_rec(0.0, 10), _rec(3.2, 10), _rec(3.5, 0, error=ErrorDetails(type="t", message="m"))])
    got = slices.slices()
    assert [(ts.start_ns - T0) // S for ts in got] == [0, 3]
    assert got[1].summary.error_request_count == 1
    assert TimesliceRecords(1.0).slices() == []


def test_the_files_have_aiperfs_shapes(tmp_path: Path) -> None:
    slices = TimesliceRecords(1.0)
    slices.add_batch([_rec(0.0, 100), _rec(0.2, 200), _rec(1.1, 50)])
    got = slices.slices()
    assert write_timeslices(tmp_path, got, {"models": {"items": [{"name": "m"}]}}) == [JSON_NAME, CSV_NAME]
    doc = json.loads((tmp_path / JSON_NAME).read_text())
    assert list(doc) == ["timeslices", "input_config"]
    first, last = doc["timeslices"]
    assert first["start_ns"] == T0 and first["end_ns"] == T0 + S and "is_complete" not in first
    assert last["is_complete"] is False
    assert first["request_latency"]["unit"] == "ms" and first["request_latency"]["avg"] == pytest.approx(150)
    assert first["request_count"] == {"unit": "requests", "avg": 2}
    rows = list(csv.reader(io.StringIO((tmp_path / CSV_NAME).read_text())))
    assert rows[0] == ["Timeslice", "Start_NS", "End_NS", "Metric", "Unit", "Stat", "Value"]
    latency = [r for r in rows[1:] if r[0] == "0" and r[3] == "Request Latency"]
    assert [r[5] for r in latency] == ["avg", "min", "max", "sum", "p1", "p5", "p10", "p25", "p50", "p75",
                                       "p90", "p95", "p99", "std"]
    assert latency[0][4:] == ["ms", "avg", "150.00"]
    assert ["0", str(T0), str(T0 + S), "Request Count", "requests", "avg", "2"] in rows
    assert timeslices_csv(got) == (tmp_path / CSV_NAME).read_bytes().decode()


def test_no_slice_writes_no_file(tmp_path: Path) -> None:
    assert write_timeslices(tmp_path, [], {}) == []
    assert not list(tmp_path.iterdir())


def test_a_slice_duration_must_be_positive() -> None:
    with pytest.raises(ValueError, match="> 0"):
        TimesliceRecords(0)
