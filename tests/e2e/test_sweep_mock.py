"""A 3-variation x 3-trial sweep of the real CLI against the mock with known timing: per-trial
folders, intervals that contain the mock's TTFT/ITL, a Pareto set that matches a brute-force
check, and aggregate files with AIPerf 0.13's key sets."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from e2e._harness import aiperf_process, finish
from e2e._references import RunQueueWait, wire_overhead_ms
from e2e.test_profile_mock import WORKER, ttft_waits_ms

from aiperf.metrics.confidence import interval
from aiperf.metrics.multirun import AGGREGATE_KEYS
from aiperf.mock_server.testing import running_mock

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # 9 runs, each starting its services

TTFT_MS, ITL_MS = 40.0, 8.0
LABELS = ("concurrency_1", "concurrency_2", "concurrency_4")
TOLERANCE_MS = 2.0
"""As the single-run check (test_profile_mock): what aiperf may add to the mock's TTFT + the
loopback cost, applied to the interval's ends."""
ITL_TOLERANCE_MS = 0.5


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_sweep_with_trials_against_the_mock(tmp_path: Path) -> None:
    out = tmp_path / "a"
    with running_mock("--ttft-ms", "0", "--itl-ms", "0") as zero:
        assert zero.proc is not None
        wire = wire_overhead_ms(zero.url, zero.proc.pid)
    with running_mock("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), "--output-tokens", "16") as server:
        assert server.proc is not None
        proc = aiperf_process("profile", "--model", "mock", "--url", server.url, "--streaming",
                              "--concurrency", "1,2,4", "--request-count", "12", "--warmup-request-count", "2",
                              "--num-profile-runs", "3", "--isl", "32", artifacts=out)
        with RunQueueWait({proc.pid: WORKER, server.proc.pid: None}) as waits:
            run = finish(proc, out, timeout=600)
    assert run.code == 0, run.stderr[-3000:]
    print(run.stdout[-2500:])

    # Layout: trial-major run folders, each a full run; warmup in the first trial only.
    for trial in (1, 2, 3):
        for label in LABELS:
            folder = out / f"profile_runs/trial_000{trial}/{label}"
            assert (folder / "profile_export_aiperf.json").is_file(), folder
            phases = load(folder / "run_config.json")["benchmark"]["phases"]
            assert len(phases) == (2 if trial == 1 else 1)
            assert load(folder / "run_config.json")["benchmark"]["random_seed"] == 42

    for label in LABELS:
        agg = load(out / f"aggregate/{label}/profile_export_aiperf_aggregate.json")
        assert set(agg) == {"schema_version", "aggregation_type", "confidence_level", "num_profile_runs",
                            "num_successful_runs", "failed_runs", "metrics"}
        assert (agg["num_profile_runs"], agg["num_successful_runs"], agg["confidence_level"]) == (3, 3, 0.95)
        for stats in agg["metrics"].values():
            assert all(tuple(s) == AGGREGATE_KEYS for s in stats.values())
        rows = list(csv.reader((out / f"aggregate/{label}/profile_export_aiperf_aggregate.csv").read_text()
                               .splitlines()))
        assert rows[0] == ["Metric", "Stat", *AGGREGATE_KEYS] and len(rows) > 10

        trials = [out / f"profile_runs/trial_000{t}/{label}" for t in (1, 2, 3)]
        ttft = agg["metrics"]["time_to_first_token"]["avg"]
        # The file's interval is the t-interval of the trials' averages.
        means = [load(t / "profile_export_aiperf.json")["time_to_first_token"]["avg"] for t in trials]
        assert ttft["mean"] == pytest.approx(np.mean(means)) and ttft["t_critical"] == pytest.approx(4.302653, abs=1e-6)
        # Contains the mock's TTFT + the wire cost: from below as measured (against the wire
        # cost less waits), from above on the trials' averages less what the worker and the
        # mock waited for a CPU (against the wire cost as measured); see test_profile_mock.
        corrected = []
        for t in trials:
            records = [json.loads(line) for line in (t / "profile_export.jsonl").read_text().splitlines()]
            corrected.append(np.mean([max(v - ttft_waits_ms(waits, r["metadata"]["request_start_ns"], v,
                                                            mock_ttft_ms=TTFT_MS), TTFT_MS)
                                      for r in records if (v := r["metrics"]["time_to_first_token"]["value"])]))
        less_waits = interval(corrected, 0.95)
        print(f"{label}: ttft CI [{ttft['ci_low']:.3f}, {ttft['ci_high']:.3f}] ms, less waits "
              f"[{less_waits.ci_low:.3f}, {less_waits.ci_high:.3f}]; wire {wire.measured_ms:.3f} ms "
              f"(less waits {wire.less_waits_ms:.3f})")
        assert ttft["ci_high"] >= TTFT_MS + wire.less_waits_ms - TOLERANCE_MS
        assert less_waits.ci_low <= TTFT_MS + wire.measured_ms + TOLERANCE_MS
        itl = agg["metrics"]["inter_token_latency"]["avg"]
        assert itl["ci_low"] - ITL_TOLERANCE_MS <= ITL_MS <= itl["ci_high"] + ITL_TOLERANCE_MS, itl

    sweep = load(out / "aggregate/sweep_aggregate/profile_export_aiperf_sweep.json")
    assert {"per_combination_metrics", "best_configurations", "pareto_optimal"} <= set(sweep)
    assert set(sweep["best_configurations"]) == {"best_throughput", "best_latency_p99"}
    assert [c["label"] for c in sweep["per_combination_metrics"]] == list(LABELS)
    points = {}
    for label in LABELS:
        agg = load(out / f"aggregate/{label}/profile_export_aiperf_aggregate.json")["metrics"]
        points[label] = (agg["request_throughput"]["avg"]["mean"], agg["request_latency"]["p99"]["mean"])
    brute = [a for a, (t, lat) in points.items()
             if not any(t2 >= t and l2 <= lat and (t2, l2) != (t, lat) for b, (t2, l2) in points.items() if b != a)]
    assert [p["label"] for p in sweep["pareto_optimal"]] == brute
    assert sweep["best_configurations"]["best_throughput"]["label"] == max(points, key=lambda k: points[k][0])
    # More concurrency against a mock with a fixed per-request time: more throughput.
    assert points["concurrency_4"][0] > points["concurrency_1"][0]
    sweep_csv = (out / "aggregate/sweep_aggregate/profile_export_aiperf_sweep.csv").read_text()
    sweep_rows = list(csv.DictReader(sweep_csv.splitlines()))
    assert [r["label"] for r in sweep_rows] == list(LABELS)
    assert {r["label"] for r in sweep_rows if r["pareto_optimal"] == "true"} == set(brute)
    assert "95% CI" in run.stdout and "Pareto-optimal" in run.stdout
