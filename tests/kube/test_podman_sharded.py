"""Issue 24's two scale modes as real pods: `runtime.issuing: per_pod` (each worker pod's
worker-group-manager issues its own slice of the plan from a `PodIssuer`, coordinated by the
timing-manager's `PodCoordinator` over `Channel.PODS`) together with `runtime.aggregation:
sharded` (each record-processor sends its aggregator's state as one shard per phase), across
two worker pods under `podman kube play` (tests/kube/_podman.py, direct mode: the generated
JobSet's pods, no operator).

The results must be exact: every planned request issued once and counted once, the exports
whole and agreeing with each other (summary, jsonl, raw, accounting).

Opt-in like test_podman_pods.py (AIPERF_PODMAN_E2E=1 after the images are built).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from kube._podman import PODMAN_E2E, STARTUP_S, PodRun

from aiperf.cli.profile_options import LocalFlags, ProfileFlags
from aiperf.config import RuntimeOptions

MOCK = ("--ttft-ms", "20", "--itl-ms", "5", "--output-tokens", "16")
WARMUP, PROFILING = 6, 60

pytestmark = PODMAN_E2E


@pytest.mark.timeout(900)
def test_per_pod_issuing_and_sharded_aggregation_across_two_worker_pods(tmp_path: Path) -> None:
    flags = ProfileFlags(model=["mock"], url=["http://mock:8000"], endpoint_type="chat", streaming=True,
                         concurrency=4, request_count=PROFILING, warmup_request_count=WARMUP, random_seed=7)
    runtime = RuntimeOptions(heartbeat_interval_s=1.0, registration_timeout_s=STARTUP_S, log_level="info")
    local = LocalFlags(ui="none", export_level="raw", issuing="per_pod", aggregation="sharded")
    with PodRun(flags, mock_args=MOCK, total_workers=2, workers_per_pod=1, workdir=tmp_path / "pods",
                runtime=runtime, local=local) as run:
        run.start()
        pods = run.wait(timeout=300)
        debug = run.debug()
    print(f"pod run timings: {pods.timings}")
    log = pods.controller_log
    assert pods.controller_exit == 0, f"{log[-3000:]}\n{debug}"
    assert (pods.artifacts / "profile_export_aiperf.json").exists(), f"no results\n{log[-3000:]}\n{debug}"
    assert (f"accounting: warmup: issued {WARMUP} = ok {WARMUP} + failed 0 + cancelled 0; "
            f"profiling: issued {PROFILING} = ok {PROFILING} + failed 0 + cancelled 0") in log, log[-3000:]
    assert '"processors": 2, "shards": 4' in log, log[-3000:]  # a shard per phase from each pod's processor

    # The timing-manager coordinated both pods in both phases (it issued nothing itself).
    timing = next(text for name, text in pods.logs.items() if name.endswith("-timing-manager"))
    started = [line for line in timing.splitlines() if "pods.phase_started" in line]
    assert len(started) == 2 and all('"pods": 2' in line for line in started), (started, timing[-3000:])

    # Exact results: the summary, the accounting, the jsonl and the raw export agree with the plan.
    assert pods.metric("request_count") == PROFILING
    ext = pods.accounting()
    assert ext["accounting_balanced"], ext["accounting_problems"]
    assert ext["accounting"]["profiling"]["issued"] == ext["accounting"]["profiling"]["ok"] == PROFILING
    assert ext["accounting"]["warmup"]["issued"] == WARMUP, ext["accounting"]
    # The jsonl holds every record, warmup's too (as with `records` and locally).
    lines = pods.records()
    assert Counter(r["metadata"]["benchmark_phase"] for r in lines) == {"warmup": WARMUP, "profiling": PROFILING}
    assert len({r["metadata"]["x_request_id"] for r in lines}) == WARMUP + PROFILING
    records = [r for r in lines if r["metadata"]["benchmark_phase"] == "profiling"]
    # Each pod issued half of the plan to its own worker, and its own processor's shard carried it.
    workers = Counter(r["metadata"]["worker_id"] for r in records)
    processors = Counter(r["metadata"]["record_processor_id"] for r in records)
    assert workers == {"worker-g0-0": PROFILING // 2, "worker-g1-0": PROFILING // 2}, workers
    assert processors == {"record-processor-g0-0": PROFILING // 2, "record-processor-g1-0": PROFILING // 2}, \
        processors
    # Both pods' raw parts joined (warmup included, as in a local run).
    raw = [json.loads(line) for line in (pods.artifacts / "profile_export_raw.jsonl").read_bytes().splitlines()]
    phases = Counter(r["metadata"]["benchmark_phase"] for r in raw)
    assert phases == {"warmup": WARMUP, "profiling": PROFILING}, phases
    assert not (pods.artifacts / "raw").exists()
    # The shards' merged statistics are those of the records themselves.
    osl = [r["metrics"]["output_sequence_length"]["value"] for r in records]
    assert osl == [16] * PROFILING and pods.metric("output_sequence_length", "max") == 16
    ttft = sorted(r["metrics"]["time_to_first_token"]["value"] for r in records)
    assert pods.metric("time_to_first_token", "min") == pytest.approx(ttft[0])
    assert pods.metric("time_to_first_token", "max") == pytest.approx(ttft[-1])
    assert pods.metric("time_to_first_token", "avg") == pytest.approx(sum(ttft) / len(ttft))
    assert pods.sidecar_status.get("results_ready") and pods.sidecar_exit == 0, debug
