"""Kubernetes mode for real: the generated JobSet's pods run under `podman kube play` against the
mock server in a container, and must measure what a local run measures.

Needs podman and the images (`scripts/images/ci.sh` builds them, plus
`./pants package mock:image`); opt-in with `AIPERF_PODMAN_E2E=1`, as
`tests/kube/run_podman_e2e.sh` does in CI. Skipped otherwise: `./pants test ::` never plays pods.

Tolerances (case A), pods vs local, same workload and seed against the same mock timing
(TTFT 20 ms, ITL 5 ms, 16 tokens): ITL is produced by the mock's pacing alone and measured
between chunks by the worker on one connection, so the network path adds nothing but jitter:
within 1 ms. TTFT includes the request's way to the mock; in pods that is a bridge + DNS-named
TCP connection instead of loopback, and the worker container runs under a 500m CPU limit
(CFS throttling can delay a send by a few ms): within 10 ms, half the 20 ms TTFT.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kube._podman import PODMAN_E2E, STARTUP_S, PodRun

from aiperf.cli.profile_options import LocalFlags, ProfileFlags
from aiperf.config import RuntimeOptions

MOCK = ("--ttft-ms", "20", "--itl-ms", "5", "--output-tokens", "16")
ITL_TOLERANCE_MS = 1.0
TTFT_TOLERANCE_MS = 10.0

pytestmark = PODMAN_E2E


def _no_results_hint(run_log: str) -> str:
    if "profiling" not in run_log:
        return ("the system-controller never entered 'profiling' (with mode=profile its main() "
                "must drive the benchmark with ProfileDriver)")
    return ""


@pytest.mark.timeout(900)
def test_pods_measure_what_a_local_run_measures(tmp_path: Path) -> None:
    from e2e._harness import aiperf

    from aiperf.mock_server.testing import running_mock

    args = ("--model", "mock", "--endpoint-type", "chat", "--streaming", "--concurrency", "4",
            "--request-count", "60", "--random-seed", "7")
    with running_mock(*MOCK) as server:
        local = aiperf("profile", *args, "--url", server.url, "--workers-max", "2", artifacts=tmp_path / "local")
    assert local.code == 0, local.stderr

    flags = ProfileFlags(model=["mock"], url=["http://mock:8000"], endpoint_type="chat", streaming=True,
                         concurrency=4, request_count=60, random_seed=7)
    with PodRun(flags, mock_args=MOCK, total_workers=2, workers_per_pod=1, workdir=tmp_path / "pods",
                local=LocalFlags(ui="none", export_level="raw")) as run:
        run.start()
        pods = run.wait(timeout=300)
        debug = run.debug()
    print(f"pod run timings: {pods.timings}")
    assert pods.controller_exit == 0, f"{pods.controller_log[-3000:]}\n{debug}"
    assert (pods.artifacts / "profile_export_aiperf.json").exists(), \
        f"no results. {_no_results_hint(pods.controller_log)}\n{pods.controller_log[-3000:]}"
    assert "accounting: profiling: issued 60 = ok 60 + failed 0 + cancelled 0" in pods.controller_log
    # The results outlive the control plane: the sidecar saw the end, then exited 0 on shutdown.
    assert pods.sidecar_status.get("exit_code") == 0 and pods.sidecar_status.get("results_ready"), debug
    assert pods.sidecar_exit == 0, debug

    assert pods.metric("request_count") == local.metric("request_count") == 60
    for run_ in (pods, local):
        ext = run_.accounting()
        assert ext["accounting_balanced"], ext["accounting_problems"]
        assert ext["accounting"]["profiling"]["issued"] == 60
    assert len(pods.records()) == 60
    # --export-level raw: both worker pods uploaded their parts (acknowledged by size) and the
    # controller joined them; the staging folder is gone.
    raw = [json.loads(line) for line in (pods.artifacts / "profile_export_raw.jsonl").read_bytes().splitlines()]
    assert len(raw) == 60 and not (pods.artifacts / "raw").exists()
    wgm_logs = [text for name, text in pods.logs.items() if name.endswith("-worker-group-manager")]
    assert len(wgm_logs) == 2
    for stat in ("min", "max", "avg"):
        assert pods.metric("output_sequence_length", stat) == local.metric("output_sequence_length", stat) == 16
    assert pods.metric("input_sequence_length") == local.metric("input_sequence_length")
    ttft = (pods.metric("time_to_first_token"), local.metric("time_to_first_token"))
    itl = (pods.metric("inter_token_latency"), local.metric("inter_token_latency"))
    print(f"pods vs local: TTFT {ttft[0]:.2f} vs {ttft[1]:.2f} ms, ITL {itl[0]:.3f} vs {itl[1]:.3f} ms")
    assert abs(itl[0] - itl[1]) <= ITL_TOLERANCE_MS, itl
    assert abs(ttft[0] - ttft[1]) <= TTFT_TOLERANCE_MS, ttft


@pytest.mark.timeout(900)
def test_a_lost_worker_pod_is_named_and_its_credits_counted(tmp_path: Path) -> None:
    count = 600  # ~15 s of profiling at concurrency 4 (~100 ms a request): time to lose a pod
    flags = ProfileFlags(model=["mock"], url=["http://mock:8000"], streaming=True, concurrency=4,
                         request_count=count, random_seed=7)
    runtime = RuntimeOptions(heartbeat_interval_s=1.0, heartbeat_timeout_s=8.0,
                             registration_timeout_s=STARTUP_S, log_level="info")
    with PodRun(flags, mock_args=MOCK, total_workers=2, workers_per_pod=1, workdir=tmp_path / "pods",
                runtime=runtime) as run:
        run.start()
        victim = run.worker_pods()[-1]  # aiperf-e2e-<id>-workers-1-0: group g1
        sc = run.container(run.controller, "control-plane")
        run.wait_until(lambda: run.jsonl_count() >= 20 or run.exit_codes().get(sc) is not None, 300,
                       "the first records in the controller's jsonl")
        if run.jsonl_count() < 20:
            pytest.fail(f"the controller exited before any records. {_no_results_hint(run.logs(sc))}\n"
                        f"{run.debug()}")
        run.kill_pod(victim)
        pods = run.wait(timeout=300)
        debug = run.debug()
    print(f"pod run timings: {pods.timings}")
    log = pods.controller_log
    print(f"controller exit {pods.controller_exit}; verdict lines:\n" + "\n".join(
        line for line in log.splitlines() if "lost" in line or line.startswith(("run ", "accounting"))))
    assert pods.controller_exit not in (0, None), f"a lost pod must not pass silently\n{log[-3000:]}\n{debug}"
    assert "system.pod_lost" in log and '"group": "g1"' in log, f"{log[-3000:]}\n{debug}"
    for sid in ("worker-g1-0", "record-processor-g1-0", "worker-group-manager-g1"):
        assert sid in log, (sid, log[-3000:])
    assert (pods.artifacts / "profile_export_aiperf.json").exists(), _no_results_hint(log)
    ext = pods.accounting()
    assert ext["accounting_balanced"], ext["accounting_problems"]
    profiling = ext["accounting"]["profiling"]
    settled = profiling["ok"] + profiling["failed"] + profiling["cancelled"] + profiling.get("lost", 0)
    assert profiling["issued"] == settled, profiling
    assert profiling.get("lost", 0) >= 1, profiling  # the credits in flight at the killed worker
    assert "lost with their worker" in log, log[-3000:]
    assert pods.metric("request_count") < count
