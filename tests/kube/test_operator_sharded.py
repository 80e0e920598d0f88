"""Issue 24's two scale modes through the operator: `aiperf kube profile --operator --issuing
per_pod --aggregation sharded` submits an AIPerfJob whose `spec.benchmark.runtime` says so, the
operator (real kopf on the fake API server) creates its JobSet, and `PodmanCluster` plays its
pods (tests/kube/_operator.py): each of the two worker pods' worker-group-manager issues its own
slice of the plan (the controller pod's timing-manager only coordinates, over the pods port
5566 the run's NetworkPolicy admits), and each pod's record-processor sends its aggregate as one
shard per phase.

The results must be exact, as in direct mode (test_podman_sharded.py): every planned request
issued once and counted once, the status's counts and the stored exports agreeing with the plan.

Opt-in like test_podman_pods.py (AIPERF_PODMAN_E2E=1 after the images are built).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from kube._operator import CR_API, NS, RUN_S, cluster, profile, status, terminal
from kube._podman import PODMAN_E2E

from aiperf.crd.model import JOB_KIND
from aiperf.kube.containers import CONTROL_PLANE_CONTAINER

pytestmark = [*PODMAN_E2E, pytest.mark.anyio]

WARMUP, PROFILING = 6, 60
CONTROLLER_POD = "aiperf-sh-controller-0-0"


@pytest.mark.timeout(900)
async def test_per_pod_issuing_and_sharded_aggregation_through_the_operator(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        kube = c.kube
        assert await profile(kube, "sh", requests=PROFILING, extra=(
            "--warmup-request-count", str(WARMUP), "--issuing", "per_pod", "--aggregation", "sharded")) == 0
        runtime = (kube.get(CR_API, JOB_KIND, NS, "sh") or {})["spec"]["benchmark"]["runtime"]
        assert (runtime.get("issuing"), runtime.get("aggregation")) == ("per_pod", "sharded"), runtime
        await kube.wait_until(lambda: terminal(kube, "sh"), timeout=RUN_S)
        final = status(kube, "sh")
        plane = c.player.logs.get((CONTROLLER_POD, CONTROL_PLANE_CONTAINER), "")
        why = f"{final}\n--- the control plane's log\n{plane[-4000:]}"
        assert final["phase"] == "Completed", why
        assert final.get("resultsExported") is True, why
        assert final["workers"]["totalPods"] == 2, final
        # The status's counts are the accounting's: exact per phase.
        phases = final.get("phases", {})
        assert phases.get("warmup", {}).get("requestsCompleted") == WARMUP, why
        assert phases.get("profiling", {}).get("requestsCompleted") == PROFILING, why
        assert final.get("requestsCompleted") == PROFILING, why
        assert (f"accounting: warmup: issued {WARMUP} = ok {WARMUP} + failed 0 + cancelled 0; "
                f"profiling: issued {PROFILING} = ok {PROFILING} + failed 0 + cancelled 0") in plane, why
        assert '"processors": 2, "shards": 4' in plane, why  # a shard per phase from each pod's processor
        # The timing-manager coordinated both pods in both phases (it issued nothing itself).
        timing = c.player.logs.get((CONTROLLER_POD, "timing-manager"), "")
        started = [line for line in timing.splitlines() if "pods.phase_started" in line]
        assert len(started) == 2 and all('"pods": 2' in line for line in started), (started, timing[-3000:])

        stored = c.results / final["resultsPath"]
        summary = json.loads((stored / "profile_export_aiperf.json").read_text())
        assert summary["request_count"]["avg"] == PROFILING, summary["request_count"]
        ext = summary["aiperf_extensions"]
        assert ext["accounting_balanced"], ext["accounting_problems"]
        assert ext["accounting"]["profiling"]["issued"] == ext["accounting"]["profiling"]["ok"] == PROFILING
        assert ext["accounting"]["warmup"]["issued"] == WARMUP, ext["accounting"]
        lines = [json.loads(line) for line in (stored / "profile_export.jsonl").read_bytes().splitlines()
                 if line.strip()]
        assert Counter(r["metadata"]["benchmark_phase"] for r in lines) == {"warmup": WARMUP,
                                                                           "profiling": PROFILING}
        assert len({r["metadata"]["x_request_id"] for r in lines}) == WARMUP + PROFILING
        records = [r for r in lines if r["metadata"]["benchmark_phase"] == "profiling"]
        # Each pod issued half of the plan to its own worker, and its own processor's shard carried it.
        workers = Counter(r["metadata"]["worker_id"] for r in records)
        processors = Counter(r["metadata"]["record_processor_id"] for r in records)
        assert workers == {"worker-g0-0": PROFILING // 2, "worker-g1-0": PROFILING // 2}, workers
        assert processors == {"record-processor-g0-0": PROFILING // 2,
                              "record-processor-g1-0": PROFILING // 2}, processors
        # The shards' merged statistics are those of the records themselves.
        ttft = sorted(r["metrics"]["time_to_first_token"]["value"] for r in records)
        assert summary["time_to_first_token"]["min"] == pytest.approx(ttft[0])
        assert summary["time_to_first_token"]["max"] == pytest.approx(ttft[-1])
        assert summary["time_to_first_token"]["avg"] == pytest.approx(sum(ttft) / len(ttft))
