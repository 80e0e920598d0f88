"""`kube show NAME` renders a live AIPerfJob from the fake API server; `kube show -f FILE`
renders a CR file offline (variables resolved, validated, what the operator would create)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from aiperf.crd.generator import build_crd
from aiperf.crd.model import JOB_KIND
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio

NS = "bench"
CR_API = "aiperf.nvidia.com/v1alpha1"
BENCH = ("--model", "Qwen/Qwen3-0.6B", "--url", "http://vllm.llm.svc:8000", "--concurrency", "8",
         "--request-count", "80")
Run = Callable[..., Awaitable[Any]]


def target(kube: FakeKube) -> tuple[str, ...]:
    return ("--kubeconfig", kube.kubeconfig_path, "-n", NS)


async def test_show_renders_the_live_cr(aiperf: Run, kube: FakeKube) -> None:
    kube.install_crd(build_crd(JOB_KIND))
    submitted = await aiperf("kube", "profile", *BENCH, "--name", "demo", "--total-workers", "12",
                             "--workers-per-pod", "5", "--image", "reg.example/aiperf/all:1", "--detach",
                             "--operator", *target(kube))
    assert submitted.code == 0, submitted.err
    kube.set_status(CR_API, JOB_KIND, NS, "demo", {
        "phase": "Initializing", "subPhase": "configuring", "requestsCompleted": 40, "requestsTotal": 80,
        "progressPercent": 50.0, "workers": {"ready": 10, "total": 12, "readyPods": 2, "totalPods": 3},
        "startupIssue": {"reason": "ImagePullBackOff", "message": "back-off pulling reg.example/aiperf/all:1",
                         "pod": "aiperf-demo-workers-0-2-x", "container": "worker-0", "critical": True},
        "conditions": [{"type": "WorkersReady", "status": "False", "reason": "Waiting",
                        "message": "10 of 12 workers ready"}],
        "resultsPath": "/results/bench/demo"})
    result = await aiperf("kube", "show", "demo", *target(kube))
    assert result.code == 0, result.err
    fields = dict(line.split(":", 1) for line in result.out.splitlines() if line and not line.startswith(" ")
                  and not line.endswith(":"))
    fields = {k: v.strip() for k, v in fields.items()}
    assert fields["Phase"] == "Initializing (configuring)"
    assert fields["Progress"] == "40/80 requests (50%)"
    assert fields["Workers"] == "10/12 ready, pods 2/3"
    assert fields["Startup issue"] == ("ImagePullBackOff: back-off pulling reg.example/aiperf/all:1 "
                                       "(pod aiperf-demo-workers-0-2-x, container worker-0) [critical]")
    assert fields["Results"] == "/results/bench/demo"
    assert "  WorkersReady   False    Waiting   10 of 12 workers ready" in result.out.splitlines()
    assert ["Image:", "reg.example/aiperf/all:1"] in [line.split() for line in result.out.splitlines()]

    raw = await aiperf("kube", "show", "demo", "-o", "json", *target(kube))
    assert json.loads(raw.out)["status"]["resultsPath"] == "/results/bench/demo"
    as_yaml = await aiperf("kube", "show", "demo", "-o", "yaml", *target(kube))
    assert yaml.safe_load(as_yaml.out)["metadata"]["name"] == "demo"


async def test_show_of_a_direct_run_and_of_no_run(aiperf: Run, kube: FakeKube) -> None:
    assert (await aiperf("kube", "profile", *BENCH, "--name", "plain", "--detach", *target(kube))).code == 0
    direct = await aiperf("kube", "show", "plain", *target(kube))
    assert direct.code == 0 and direct.out.startswith("run plain is a direct-mode run (JobSet aiperf-plain, no "
                                                      "AIPerfJob): Running")
    missing = await aiperf("kube", "show", "nope", *target(kube))
    assert (missing.code, missing.err) == (2, "error: no run nope in namespace bench; `aiperf kube list -n "
                                              "bench` shows the runs\n")
    both = await aiperf("kube", "show", "x", "-f", "y.yaml")
    assert (both.code, both.err) == (2, "error: kube show: give a run NAME or --file PATH (one of them)\n")


async def _cr_file(aiperf: Run, path: Path) -> dict[str, Any]:
    printed = await aiperf("kube", "generate", *BENCH, "--name", "demo", "--total-workers", "12",
                           "--workers-per-pod", "5", "--operator")
    job: dict[str, Any] = yaml.safe_load(printed.out)
    job["spec"]["image"] = "${REGISTRY}/aiperf/all:${TAG:0.1.0}"  # AIPerf's ${VAR:default}
    job["spec"]["variables"] = {"per_pod": 5}
    job["spec"]["benchmark"]["runtime"]["workersPerPod"] = "{{ per_pod }}"
    path.write_text(yaml.safe_dump(job))
    return job


async def test_show_file_resolves_variables_validates_and_summarises(aiperf: Run, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "job.yaml"
    await _cr_file(aiperf, path)
    monkeypatch.setenv("REGISTRY", "reg.example:5000")
    result = await aiperf("kube", "show", "-f", str(path))
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == "AIPerfJob/demo in namespace default: valid"
    assert ["Image:", "reg.example:5000/aiperf/all:0.1.0"] in [line.split() for line in lines]
    assert "    JobSet aiperf-demo: 1 controller pod, 3 worker pods (2 of 5 and 1 of 2 workers; 12 in all, " \
           "1 record processors per pod)" in lines
    as_json = await aiperf("kube", "show", "-f", str(path), "-o", "json")
    assert json.loads(as_json.out)["spec"]["image"] == "reg.example:5000/aiperf/all:0.1.0"


async def test_show_file_problems(aiperf: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "job.yaml"
    job = await _cr_file(aiperf, path)
    monkeypatch.delenv("REGISTRY", raising=False)
    unset = await aiperf("kube", "show", "-f", str(path))
    assert (unset.code, unset.err) == (2, f"error: {path}: image: ${{REGISTRY}}: the environment variable is not "
                                          "set (give a default: ${REGISTRY:value})\n")
    job["spec"]["image"] = "reg.example/aiperf/all:1"
    job["spec"]["connectionsPerWorker"] = 0
    path.write_text(yaml.safe_dump(job))
    invalid = await aiperf("kube", "show", "-f", str(path))
    assert invalid.code == 1
    assert invalid.out.splitlines() == ["AIPerfJob/demo in namespace default: invalid",
                                        "  spec.connectionsPerWorker: 0 is less than the minimum of 1"]
    missing = await aiperf("kube", "show", "-f", str(tmp_path / "absent.yaml"))
    assert missing.code == 2 and missing.err.startswith(f"error: {tmp_path / 'absent.yaml'}: cannot read the file")
