"""`--aggregation sharded` (issue 24, item 4): the same seeded run aggregated from records and
from the record-processors' shards gives the same results (docs/scale.md, "Sharded aggregation").

Two real runs never time alike, so the checks are: what does not depend on timing (request and
error counts, token counts: every statistic) is equal across the two; and in each run, every
per-request metric's statistics are those of its own profile_export.jsonl values (count exact,
min, max and percentiles as numpy's linear ones, avg, within float rounding: the summary
converts units after the statistics, the jsonl before), so no record is missing or counted
twice in either."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from e2e._harness import Run, aiperf

from aiperf.mock_server.testing import running_mock

pytestmark = pytest.mark.slow

WARMUP, REQUESTS = 8, 120
PERCENTILES = (1, 5, 10, 25, 50, 75, 90, 95, 99)
TIMING_FREE = ("input_sequence_length", "output_sequence_length", "output_token_count", "usage_prompt_tokens",
               "usage_completion_tokens", "usage_total_tokens", "total_isl", "total_osl", "request_count",
               "completed_request_count", "total_output_tokens", "request_error_rate")
"""Metrics whose values depend on the seeded dataset and the mock's fixed answers only."""


def _profile(url: str, aggregation: str, level: str) -> list[str]:
    return ["profile", "--model", "mock", "--url", url, "--streaming", "--concurrency", "8",
            "--request-count", str(REQUESTS), "--warmup-request-count", str(WARMUP), "--workers-max", "2",
            "--record-processors", "2", "--random-seed", "11", "--ui", "none", "--export-level", level,
            "--aggregation", aggregation]


def _pair(tmp_path: Path, level: str, *mock_args: str) -> dict[str, Run]:
    """The run with each aggregation, each against a fresh mock (its seeded errors start over)."""
    runs = {}
    for aggregation in ("records", "sharded"):
        with running_mock("--ttft-ms", "2", "--itl-ms", "1", "--output-tokens", "16", *mock_args) as server:
            artifacts = tmp_path / aggregation
            run = runs[aggregation] = aiperf(*_profile(server.url, aggregation, level), artifacts=artifacts)
        assert run.code == 0, run.stderr[-2000:]
        assert run.accounting()["accounting_balanced"], run.accounting()["accounting_problems"]
    return runs


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _same_stats(ours: dict[str, Any], theirs: dict[str, Any], tag: str) -> None:
    """Equal statistics: exactly, but avg, std and sum within 1e-9 (float sums in another order)."""
    assert ours.keys() == theirs.keys(), tag
    for stat, value in ours.items():
        if stat in ("avg", "std", "sum") and isinstance(value, float):
            assert _close(value, theirs[stat]), (tag, stat, value, theirs[stat])
        else:
            assert value == theirs[stat], (tag, stat, value, theirs[stat])


def _jsonl_values(run: Run) -> dict[str, list[float]]:
    """Per metric, the values of the profiling records that succeeded (lists flattened)."""
    values: dict[str, list[float]] = {}
    for record in run.records():
        if record["metadata"]["benchmark_phase"] != "profiling" or record.get("error"):
            continue
        for tag, metric in record["metrics"].items():
            value = metric["value"]
            values.setdefault(tag, []).extend(value if isinstance(value, list) else [value])
    return values


def _summary_is_its_records(run: Run) -> int:
    """Every metric with percentiles in the summary against its jsonl values; how many."""
    summary, values = run.summary(), _jsonl_values(run)
    checked = 0
    for tag, stats in summary.items():
        if not isinstance(stats, dict) or "p50" not in stats or tag not in values:
            continue
        column = np.array(values[tag], dtype=np.float64)
        assert stats["count"] == column.size, tag
        expected = {"min": column.min(), "max": column.max(), "avg": column.mean(),
                    **{f"p{p}": v for p, v in zip(PERCENTILES, np.percentile(column, PERCENTILES), strict=True)}}
        for stat, value in expected.items():
            assert math.isclose(stats[stat], float(value), rel_tol=1e-9, abs_tol=1e-9), (tag, stat, stats[stat], value)
        checked += 1
    return checked


def test_sharded_gives_the_results_of_records(tmp_path: Path) -> None:
    runs = _pair(tmp_path, "records")
    records, sharded = (runs[a].summary() for a in ("records", "sharded"))
    assert records["request_count"]["avg"] == sharded["request_count"]["avg"] == REQUESTS
    assert records.keys() == sharded.keys()
    for tag in TIMING_FREE:
        _same_stats(sharded[tag], records[tag], tag)
    assert records["input_config"]["runtime"]["aggregation"] == "records"
    assert sharded["input_config"]["runtime"]["aggregation"] == "sharded"
    for run in runs.values():
        assert len(run.records()) == WARMUP + REQUESTS
        assert _summary_is_its_records(run) >= 20
    # the shards did come: one block of jsonl lines per record-processor (batches interleave
    # them; a record still on its way at the barrier would add a batch of its own)
    assert _blocks(runs["sharded"]) <= 2 + 2, _blocks(runs["sharded"])


def _blocks(run: Run) -> int:
    """Runs of consecutive profiling lines of profile_export.jsonl from one record-processor."""
    ids = [r["metadata"]["record_processor_id"] for r in run.records()
           if r["metadata"]["benchmark_phase"] == "profiling"]
    return 1 + sum(a != b for a, b in zip(ids, ids[1:], strict=False))


def test_sharded_with_raw_export_and_errors(tmp_path: Path) -> None:
    """The raw barrier comes after the shards' (`Finalize` first): the raw export is whole in
    both modes, and failed requests are counted alike (the mock's seeded errors: the same
    number in both runs, whichever requests they hit)."""
    runs = _pair(tmp_path, "raw", "--error-rate", "0.2", "--seed", "5")
    records, sharded = (runs[a].summary() for a in ("records", "sharded"))
    for tag in ("request_count", "error_request_count"):
        assert tag in records and records[tag]["avg"] == sharded[tag]["avg"], tag
    assert records["error_request_count"]["avg"] > 0
    assert records["error_summary"] == sharded["error_summary"]
    for run in runs.values():
        raw = (run.artifacts / "profile_export_raw.jsonl").read_bytes().splitlines()
        assert len(raw) == len(run.records()) == WARMUP + REQUESTS
        errors = sum(1 for r in run.records() if r["metadata"]["benchmark_phase"] == "profiling" and r.get("error"))
        assert errors == run.summary()["error_request_count"]["avg"]
        assert orjson.loads(raw[0])["metadata"]["credit_num"] >= 0
        _summary_is_its_records(run)
