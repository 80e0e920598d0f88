"""The operator end to end with real pods: `aiperf kube profile` submits an AIPerfJob to the fake
API server, the operator (real kopf, in this process) creates the run's RBAC, ConfigMap, Secret
and JobSet, and `PodmanCluster` (tests/kube/_cluster.py) plays the JobSet controller and the
kubelet on podman; the pods reach the fake API server the way pods reach a cluster's (in-cluster
env and a mounted ServiceAccount token, RBAC enforced), on the run's own internal network, in a
namespace enforcing the `restricted` Pod Security level (tests/kube/_operator.py).

Opt-in like test_podman_pods.py (AIPERF_PODMAN_E2E=1 after the images are built).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from kube._operator import (
    BENCHMARK,
    CR_API,
    NS,
    RUN_S,
    TEARDOWN_S,
    Cluster,
    cluster,
    kube_cli,
    played_containers,
    profile,
    status,
    terminal,
)
from kube._podman import MOCK_ALIAS, MOCK_PORT, PODMAN_E2E, podman

from aiperf.cli.main import main
from aiperf.crd.model import JOB_KIND, SWEEP_KIND
from aiperf.kube.containers import CONTROL_PLANE_CONTAINER
from aiperf.kube.jobset import JOBSET_API_VERSION
from aiperf.kuberun.status_push import HEARTBEAT_ANNOTATION
from aiperf.results.index import ResultsIndex
from aiperf.testing.fake_kube import FakeKube
from aiperf.testing.fake_kube_select import Selector

pytestmark = [*PODMAN_E2E, pytest.mark.anyio]


@pytest.mark.timeout(900)
async def test_a_run_completes_through_the_operator(tmp_path: Path) -> None:
    """The controller pod pushes its status with its own ServiceAccount (phases, counts, the
    nine worker keys, a UID-fenced heartbeat, the server-metrics projection); at the control plane's exit the operator copies
    the exports from the results sidecar onto its volume and completes the run; once the pod is
    gone nothing has brought `subPhase` back. Then the CR is deleted and a same-name run with an
    unpullable image is created at once, while the old JobSet may still terminate: the new run
    adopts nothing of the old one, fails on its own blocker, and the old results stay."""
    async with cluster(tmp_path) as c:
        kube = c.kube
        assert await profile(kube, "op") == 0
        await kube.wait_until(lambda: terminal(kube, "op"), timeout=RUN_S)
        final = status(kube, "op")
        plane = c.player.log_tail("aiperf-op-controller-0-0", CONTROL_PLANE_CONTAINER)
        why = f"{final}\n--- the control plane's log\n{plane}"
        assert final["phase"] == "Completed", why
        assert final.get("phases", {}).get("profiling", {}).get("requestsCompleted") == 40, why
        assert final.get("requestsCompleted") == 40 and final.get("resultsExported") is True, why
        assert final["workers"]["totalPods"] == 2, final
        stored = c.results / final["resultsPath"]
        assert final["resultsPath"] == f"{NS}/op/{final['runEpoch']}", final
        summary = json.loads((stored / "profile_export_aiperf.json").read_text())
        assert summary["request_count"]["avg"] == 40, summary["request_count"]
        # The server-metrics-manager container scraped the mock's /metrics (on by default): its
        # export came with the results and its projection rode on the status push.
        scraped = json.loads((stored / "server_metrics_export.json").read_text())
        tokens = scraped["metrics"]["vllm:generation_tokens"]["series"]
        scrapes = (f"{tokens}\n{scraped['summary']}\n{scraped.get('endpoint_errors')}\n--- the scraper's log\n"
                   + c.player.log_tail("aiperf-op-controller-0-0", "server-metrics-manager"))
        assert sum(x["stats"]["total"] for x in tokens) == 40 * 16, scrapes
        assert "vllm:generation_tokens" in json.dumps(final.get("serverMetrics")), final.get("serverMetrics")
        old = kube.get(CR_API, JOB_KIND, NS, "op") or {}
        assert HEARTBEAT_ANNOTATION in (old["metadata"].get("annotations") or {}), old["metadata"]
        # Only the controller writes `workers`, and RBAC is on: the pod's ServiceAccount sent these.
        pushes = [r for r in kube.requests_for("PATCH", f"/apis/{CR_API}/namespaces/{NS}/aiperfjobs/op/status")
                  if any(op.get("path") == "/status/workers" for op in r.body)]
        assert pushes, "no status push came from the controller pod"
        await kube.wait_until(lambda: played_containers(c, "op-controller") == 0, timeout=120)
        assert "subPhase" not in status(kube, "op"), status(kube, "op")

        assert await anyio.to_thread.run_sync(kube_cli, kube, "kube", "delete", "op") == 0
        # The CR goes once the operator has released its finalizer; its JobSet may still terminate.
        await kube.wait_until(lambda: kube.get(CR_API, JOB_KIND, NS, "op") is None, timeout=60)
        kube.create({"apiVersion": CR_API, "kind": JOB_KIND, "metadata": {"name": "op", "namespace": NS},
                     "spec": {"benchmark": BENCHMARK, "image": "localhost/aiperf/does-not-exist:latest",
                              "workersPerPod": 1}})
        new_uid = (kube.get(CR_API, JOB_KIND, NS, "op") or {})["metadata"]["uid"]
        assert new_uid != old["metadata"]["uid"]
        await kube.wait_until(lambda: terminal(kube, "op"), timeout=180)
        again = status(kube, "op")
        assert again["phase"] == "Failed" and again["startupIssue"]["reason"] in ("ErrImagePull",
                                                                                 "ImagePullBackOff"), again
        owners = [(o["metadata"]["ownerReferences"][0]["uid"]) for o in kube.store.list_objects(
            kube.kind("v1", "ConfigMap"), NS, Selector.parse(None, None)) if o["metadata"].get("ownerReferences")]
        assert old["metadata"]["uid"] not in owners, owners
        assert (stored / "profile_export_aiperf.json").exists(), "the old run's results went"
        # The index kept the run through its CR's deletion; latest.txt names it.
        record = await ResultsIndex(c.results).run(NS, "op", final["runEpoch"])
        assert record is not None and record.phase == "Completed", record
        assert (c.results / NS / "op" / "latest.txt").read_text().strip() == final["runEpoch"]


@pytest.mark.timeout(900)
async def test_cancel_mid_run_after_an_operator_restart(tmp_path: Path) -> None:
    """The operator restarts while the run is under way; the new one honours `kube cancel`:
    Cancelled, the JobSet suspended, its pods gone."""
    async with cluster(tmp_path) as c:
        kube = c.kube
        assert await profile(kube, "cx", requests=100_000) == 0
        await kube.wait_until(lambda: status(kube, "cx").get("phase") == "Running" or terminal(kube, "cx"),
                              timeout=RUN_S)
        assert status(kube, "cx")["phase"] == "Running", status(kube, "cx")
        await c.operator.restart()
        assert await anyio.to_thread.run_sync(kube_cli, kube, "kube", "cancel", "cx") == 0
        await kube.wait_until(lambda: terminal(kube, "cx"), timeout=60)
        assert status(kube, "cx")["phase"] == "Cancelled", status(kube, "cx")
        assert (kube.get(JOBSET_API_VERSION, "JobSet", NS, "aiperf-cx") or {})["spec"]["suspend"] is True
        await kube.wait_until(lambda: played_containers(c, "cx") == 0, timeout=120)
        assert c.operator.starts == 2


@pytest.mark.timeout(600)
async def test_runs_that_never_start_fail_past_their_bounds(tmp_path: Path) -> None:
    """Two runs whose image does not exist: one is failed by the startup diagnosis once the pull
    error outlasts its threshold (startupIssue recorded first), the other by `timeoutSeconds`,
    which is shorter; both JobSets deleted."""
    async with cluster(tmp_path) as c:
        kube = c.kube
        for name, extra in (("pull", {}), ("tm", {"timeoutSeconds": 5})):
            kube.create({"apiVersion": CR_API, "kind": JOB_KIND, "metadata": {"name": name, "namespace": NS},
                         "spec": {"benchmark": BENCHMARK, "image": "localhost/aiperf/does-not-exist:latest",
                                  "workersPerPod": 1, **extra}})
        await kube.wait_until(lambda: "startupIssue" in status(kube, "pull") or terminal(kube, "pull"), timeout=120)
        issue = status(kube, "pull")["startupIssue"]
        assert issue["critical"] is True and issue["fingerprint"] and issue["firstObservedTime"], issue
        await kube.wait_until(lambda: terminal(kube, "pull") and terminal(kube, "tm"), timeout=120)
        for name, reason in (("pull", "StartupFailed"), ("tm", "TimedOut")):
            final = status(kube, name)
            assert final["phase"] == "Failed", final
            assert any(cond["type"] == reason and cond["status"] == "True" for cond in final["conditions"]), final
            await kube.wait_until(lambda n=name: kube.get(JOBSET_API_VERSION, "JobSet", NS, f"aiperf-{n}") is None,
                                  timeout=60)


SWEEP_IMAGE = "localhost/aiperf/sweep-controller:latest"



def need_sweep_image() -> None:
    have = podman("images", "--format", "{{.Repository}}:{{.Tag}}", check=False).stdout.split()
    if SWEEP_IMAGE not in have:
        pytest.fail(f"AIPERF_PODMAN_E2E=1 but {SWEEP_IMAGE} is missing (scripts/images/ci.sh builds it)")


def sweep_status(kube: FakeKube, name: str) -> dict[str, Any]:
    return dict((kube.get(CR_API, SWEEP_KIND, NS, name) or {}).get("status") or {})


def sweep_argv(kube: FakeKube, name: str, requests: int) -> list[str]:
    """`aiperf kube sweep --concurrency 2,4 --detach` of a small sweep against the mock."""
    return ["kube", "sweep", "--model", "mock", "--url", f"http://{MOCK_ALIAS}:{MOCK_PORT}", "--endpoint-type",
            "chat", "--streaming", "--concurrency", "2,4", "--request-count", str(requests), "--name", name,
            # one prompt per request is AIPerf's default since issue 21: 100,000 would hold the
            # child's start-up past RUN_S on 2 cores
            "--num-dataset-entries", "100",
            "--total-workers", "1", "--workers-per-pod", "1", "--detach", "--kubeconfig", kube.kubeconfig_path,
            "-n", NS]


def posted_children(kube: FakeKube) -> list[str]:
    return [r.body["metadata"]["name"] for r in kube.requests_for("POST", f"/apis/{CR_API}/namespaces/{NS}/aiperfjobs")]


def patch_ops(kube: FakeKube, path: str) -> list[dict[str, Any]]:
    """The operations of every JSON patch sent to `path` (merge patches left out)."""
    return [op for r in kube.requests_for("PATCH", path) if isinstance(r.body, list) for op in r.body]



async def _killed_then_completed(c: Cluster) -> None:
    """Sweep `sw` (`kube sweep --concurrency 2,4`): its sweep-controller pod (own image and
    ServiceAccount, RBAC enforced) is killed once the first child exists; JobSet restarts it
    (failurePolicy); the new one replans the same plan (same digest), adopts the first child
    (created once) and creates the second; it reads each child's summary from its results
    sidecar and writes the sweep aggregate, which the operator harvests onto its volume before
    it completes the sweep and deletes the sweep's JobSet."""
    kube = c.kube
    await kube.wait_until(lambda: kube.get(CR_API, JOB_KIND, NS, "sw-v0-t1") is not None, timeout=RUN_S)
    v0_uid = (kube.get(CR_API, JOB_KIND, NS, "sw-v0-t1") or {})["metadata"]["uid"]
    first_pod = "aiperf-sweep-sw-ctl-0-0"
    await kube.wait_until(lambda: (kube.get("v1", "Pod", NS, first_pod) or {}).get("status", {}).get(
        "phase") == "Running", timeout=60)
    podman("pod", "kill", first_pod)  # every container dies at once, as when a node loses the pod
    await kube.wait_until(lambda: (kube.get(JOBSET_API_VERSION, "JobSet", NS, "aiperf-sweep-sw") or {}).get(
        "status", {}).get("restarts") == 1, timeout=120)
    await kube.wait_until(lambda: kube.get("v1", "Pod", NS, f"{first_pod}-r1") is not None, timeout=180)
    second = kube.get("v1", "Pod", NS, f"{first_pod}-r1") or {}
    assert second["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "1", second
    await kube.wait_until(lambda: sweep_status(kube, "sw").get("phase") in ("Completed", "Failed", "Cancelled"),
                          timeout=3 * RUN_S)
    final = sweep_status(kube, "sw")
    assert final["phase"] == "Completed", final
    assert final["runStates"] == {"sw-v0-t1": "Completed", "sw-v1-t1": "Completed"}, final
    assert (kube.get(CR_API, JOB_KIND, NS, "sw-v0-t1") or {})["metadata"]["uid"] == v0_uid
    assert [n for n in posted_children(kube) if n.startswith("sw-")] == ["sw-v0-t1", "sw-v1-t1"]
    # Both incarnations wrote status.aggregation with the same plan digest.
    digests = [op["value"].get("planDigest") for op in patch_ops(
        kube, f"/apis/{CR_API}/namespaces/{NS}/aiperfsweeps/sw/status") if op.get("path") == "/status/aggregation"]
    assert len(digests) >= 3 and len(set(digests)) == 1 and digests[0], digests  # Running, Running, Complete
    assert final["resultsAvailable"] is True and final["resultsPath"] == f"{NS}/sweeps/sw/{final['runEpoch']}"
    aggregate = json.loads((c.results / final["resultsPath"] / "aggregate.json").read_text())
    combos = aggregate["sweep_aggregate"]["per_combination_metrics"]
    assert [x["label"] for x in combos] == ["concurrency_2", "concurrency_4"], combos
    assert all(x["num_successful_runs"] == 1 for x in combos), combos
    assert all(x["metrics"]["request_count"]["avg"]["mean"] == 20 for x in combos), combos
    for child in ("sw-v0-t1", "sw-v1-t1"):  # each child's own results on the volume too
        child_status = status(kube, child)
        assert (c.results / child_status["resultsPath"] / "profile_export_aiperf.json").exists(), child_status
    await kube.wait_until(lambda: kube.get(JOBSET_API_VERSION, "JobSet", NS, "aiperf-sweep-sw") is None, timeout=60)


async def _cancelled_mid_run(c: Cluster) -> None:
    """Sweep `sc` is cancelled (`kube cancel --kind sweep`) while its first child runs: sweep
    and child end Cancelled, the child's pods go, no second child is created."""
    kube = c.kube
    await kube.wait_until(lambda: status(kube, "sc-v0-t1").get("phase") in ("Running", "Completed", "Failed",
                                                                           "Cancelled"), timeout=RUN_S)
    assert status(kube, "sc-v0-t1")["phase"] == "Running", status(kube, "sc-v0-t1")
    assert await anyio.to_thread.run_sync(kube_cli, kube, "kube", "cancel", "sc", "--kind", "sweep") == 0
    await kube.wait_until(lambda: sweep_status(kube, "sc").get("phase") in ("Completed", "Failed", "Cancelled")
                          and terminal(kube, "sc-v0-t1"), timeout=180)
    assert sweep_status(kube, "sc")["phase"] == "Cancelled", sweep_status(kube, "sc")
    assert status(kube, "sc-v0-t1")["phase"] == "Cancelled", status(kube, "sc-v0-t1")
    await kube.wait_until(lambda: played_containers(c, "sc-v0-t1") == 0, timeout=TEARDOWN_S)
    assert [n for n in posted_children(kube) if n.startswith("sc-")] == ["sc-v0-t1"]


async def _delete_mid_run(c: Cluster) -> None:
    """Sweep `sd` is deleted while its first child runs: the child it owns is cancelled, then
    garbage-collected with the sweep's JobSet; their pods go and no second child is created."""
    kube = c.kube
    await kube.wait_until(lambda: status(kube, "sd-v0-t1").get("phase") in ("Running", "Completed", "Failed",
                                                                           "Cancelled"), timeout=RUN_S)
    assert status(kube, "sd-v0-t1")["phase"] == "Running", status(kube, "sd-v0-t1")
    assert await anyio.to_thread.run_sync(kube_cli, kube, "kube", "delete", "sd", "--kind", "sweep") == 0
    await kube.wait_until(lambda: kube.get(CR_API, SWEEP_KIND, NS, "sd") is None
                          and kube.get(CR_API, JOB_KIND, NS, "sd-v0-t1") is None, timeout=180)
    cancels = [op for op in patch_ops(kube, f"/apis/{CR_API}/namespaces/{NS}/aiperfjobs/sd-v0-t1")
               if op.get("path") == "/spec/cancel"]
    assert cancels, "nobody cancelled the deleted sweep's running child"
    await kube.wait_until(lambda: played_containers(c, "sd-v0-t1") == 0 and played_containers(c, "sweep-sd") == 0,
                          timeout=TEARDOWN_S)
    assert [n for n in posted_children(kube) if n.startswith("sd-")] == ["sd-v0-t1"]


@pytest.mark.timeout(1800)
async def test_sweeps_through_the_operator(tmp_path: Path) -> None:
    """Three sweeps side by side in one cluster (their pods start together, which cuts the wait):
    `sw` loses its sweep-controller pod and still completes (`_killed_then_completed`), `sc` is
    cancelled mid-run (`_cancelled_mid_run`), `sd` is deleted mid-run (`_delete_mid_run`)."""
    need_sweep_image()
    async with cluster(tmp_path) as c:
        for name, requests in (("sw", 20), ("sc", 100_000), ("sd", 100_000)):
            assert await anyio.to_thread.run_sync(main, sweep_argv(c.kube, name, requests)) == 0
        async with anyio.create_task_group() as tg:
            for scenario in (_killed_then_completed, _cancelled_mid_run, _delete_mid_run):
                tg.start_soon(scenario, c)
