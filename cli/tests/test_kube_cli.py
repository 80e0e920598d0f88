"""`aiperf kube ...` end to end in-process against the fake API server: the exact requests made,
what is printed, and the exit codes (0 done, 1 cluster or run failure, 2 user mistake)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from aiperf.testing.fake_kube import FakeKube
from aiperf.testing.fake_sidecar import FakeSidecar

pytestmark = pytest.mark.anyio

NS = "bench"
JS_API = "jobset.x-k8s.io/v1alpha2"
JS_PATH = f"/apis/{JS_API}/namespaces/{NS}/jobsets"
RBAC_PATH = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}"
PROBE = ("GET", "/apis/aiperf.nvidia.com/v1alpha1")  # is the AIPerfJob CRD served? (no: direct mode)
CREATE_REQUESTS = [
    PROBE,
    ("GET", f"/api/v1/namespaces/{NS}"),
    ("POST", f"/api/v1/namespaces/{NS}/serviceaccounts"),
    ("POST", f"{RBAC_PATH}/roles"),
    ("POST", f"{RBAC_PATH}/rolebindings"),
    ("POST", f"/api/v1/namespaces/{NS}/secrets"),
    ("POST", f"/api/v1/namespaces/{NS}/configmaps"),
    ("POST", JS_PATH),
]
BENCH = ("--model", "Qwen/Qwen3-0.6B", "--url", "http://vllm.llm.svc:8000", "--concurrency", "8",
         "--request-count", "80")

Run = Callable[..., Awaitable[Any]]


def kube_args(kube: FakeKube, *args: str) -> list[str]:
    return [*args, "--kubeconfig", kube.kubeconfig_path, "-n", NS]


async def start_detached(aiperf: Run, kube: FakeKube, name: str = "demo") -> None:
    result = await aiperf("kube", "profile", *BENCH, *kube_args(kube, "--name", name, "--total-workers", "3",
                                                                "--detach"))
    assert result.code == 0, result.err


def add_controller_pod(kube: FakeKube, name: str = "demo") -> str:
    pod = f"aiperf-{name}-controller-0-0-abcde"
    kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": NS, "labels": {
        "jobset.sigs.k8s.io/jobset-name": f"aiperf-{name}",
        "jobset.sigs.k8s.io/replicatedjob-name": "controller"}},
        "spec": {"containers": [{"name": "control-plane", "image": "x"},
                                {"name": "api", "image": "x", "ports": [{"containerPort": 9090}]},
                                {"name": "results-sidecar", "image": "x", "ports": [{"containerPort": 9091}]}]}})
    kube.run_pod(NS, pod)  # scheduled, with a pod IP, every container running
    return pod


def add_jobset(kube: FakeKube, name: str = "demo") -> None:
    kube.create({"apiVersion": JS_API, "kind": "JobSet", "metadata": {"name": f"aiperf-{name}", "namespace": NS},
                 "spec": {"replicatedJobs": []}})


def finished_run(kube: FakeKube, exit_code: int = 0) -> tuple[str, FakeSidecar]:
    """A run whose control plane (and api container) exited, its results sidecar serving."""
    add_jobset(kube)
    pod = add_controller_pod(kube)
    kube.end_container(NS, pod, "control-plane", exit_code)
    kube.end_container(NS, pod, "api")
    fake = FakeSidecar(RESULT_FILES, kube=kube, namespace=NS, pod=pod, exit_code=exit_code)
    kube.register_proxy(NS, pod, 9091, fake)
    return pod, fake


RESULT_FILES = {"profile_export_aiperf.json": b'{"ok": true}\n', "profile_export_aiperf.csv": b"a,b\n1,2\n",
                "profile_export.jsonl": b"{}\n" * 1000, "inputs.json": b'{"data": []}\n',
                "profile_export_console.txt": b"aiperf | LLM Metrics\n"}


# -- profile ------------------------------------------------------------------------------------

async def test_profile_detach_creates_the_six_objects_in_order(aiperf: Run, kube: FakeKube) -> None:
    result = await aiperf("kube", "profile", *BENCH, *kube_args(kube, "--name", "demo", "--detach"))
    assert result.code == 0, result.err
    assert [(r.method, r.path) for r in kube.requests] == CREATE_REQUESTS
    assert [r.body["kind"] for r in kube.requests[2:]] == ["ServiceAccount", "Role", "RoleBinding", "Secret",
                                                           "ConfigMap", "JobSet"]
    assert all(r.body["metadata"]["namespace"] == NS for r in kube.requests[2:])
    assert sorted(kube.requests[5].body["data"]) == ["client.key", "server.key"]  # a fresh CURVE pair
    assert result.out.splitlines()[:6] == [
        f"created ServiceAccount {NS}/aiperf-demo", f"created Role {NS}/aiperf-demo",
        f"created RoleBinding {NS}/aiperf-demo", f"created Secret {NS}/aiperf-demo-curve",
        f"created ConfigMap {NS}/aiperf-demo-config", f"created JobSet {NS}/aiperf-demo"]
    assert "aiperf kube results demo --from-pods" in result.out


async def test_profile_in_a_missing_namespace_creates_nothing(aiperf: Run, kube: FakeKube) -> None:
    result = await aiperf("kube", "profile", *BENCH, "--name", "demo", "--detach",
                          "--kubeconfig", kube.kubeconfig_path, "-n", "absent")
    assert result.code == 2
    assert result.err == ("error: namespace absent does not exist; create it first "
                          "(it is never created for you)\n")
    assert kube.requests_for("POST") == []
    assert [(r.method, r.path) for r in kube.requests] == [PROBE, ("GET", "/api/v1/namespaces/absent")]


async def test_profile_rejects_invalid_flags_before_any_request(aiperf: Run, kube: FakeKube) -> None:
    result = await aiperf("kube", "profile", "--model", "m", "--concurrency", "0",
                          *kube_args(kube, "--name", "demo"))
    assert (result.code, result.err) == (2, "error: --concurrency 0: expected an integer >= 1\n")
    result = await aiperf("kube", "profile", *BENCH, *kube_args(kube, "--name", "Bad_Name"))
    assert result.code == 2 and result.err.startswith("error: --name 'Bad_Name': must be lowercase")
    result = await aiperf("kube", "profile", *BENCH, *kube_args(kube, "--name", "demo", "--bogus", "1"))
    assert result.code == 2 and result.err.count("\n") == 1 and "--bogus" in result.err
    assert kube.requests == []


async def test_profile_twice_says_to_delete_first(aiperf: Run, kube: FakeKube) -> None:
    await start_detached(aiperf, kube)
    result = await aiperf("kube", "profile", *BENCH, *kube_args(kube, "--name", "demo", "--detach"))
    assert result.code == 2
    assert result.err == ("error: ServiceAccount aiperf-demo already exists in namespace bench; run "
                          "`aiperf kube delete demo -n bench` first (or choose another --name)\n")


async def _profile_until_the_control_plane_exits(aiperf: Run, kube: FakeKube, tmp_path: Path, exit_code: int,
                                                 *extra: str) -> tuple[Any, str, FakeSidecar]:
    results: list[Any] = []

    async def run() -> None:
        results.append(await aiperf("kube", "profile", *BENCH, *kube_args(
            kube, "--name", "demo", "--artifact-dir", str(tmp_path), *extra)))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await kube.wait_until(lambda: len(kube.store.watchers) >= 2)  # the JobSet and the controller pods
            pod = add_controller_pod(kube)
            fake = FakeSidecar(RESULT_FILES, kube=kube, namespace=NS, pod=pod, exit_code=exit_code)
            kube.register_proxy(NS, pod, 9091, fake)
            kube.set_status(JS_API, "JobSet", NS, "aiperf-demo", {"replicatedJobsStatus": [
                {"name": "controller", "ready": 1, "succeeded": 0, "failed": 0}]})
            kube.end_container(NS, pod, "control-plane", exit_code)  # the JobSet runs on: the sidecar serves
            kube.end_container(NS, pod, "api")
    (result,) = results
    return result, pod, fake


async def test_profile_waits_for_the_control_plane_then_downloads_from_the_sidecar_and_retires_it(
        aiperf: Run, kube: FakeKube, tmp_path: Path) -> None:
    result, pod, fake = await _profile_until_the_control_plane_exits(aiperf, kube, tmp_path, 0)
    assert result.code == 0, result.err
    progress = [line.split("] ", 1)[1] for line in result.out.splitlines() if line.startswith("[")]
    assert progress[0] == "run demo: Running"
    dest = tmp_path / "demo"
    assert {p.name: p.read_bytes() for p in dest.iterdir()} == RESULT_FILES
    assert (f"results: {dest}/ (inputs.json, profile_export.jsonl, profile_export_aiperf.csv, "
            f"profile_export_aiperf.json, profile_export_console.txt) from pod {pod}") in result.out
    assert f"results sidecar of pod {pod} shut down" in result.out and fake.shutdowns == 1
    proxied = [(r.method, r.path.split("/proxy", 1)[1]) for r in kube.requests if "/proxy/" in r.path]
    assert all(f"/pods/{pod}:9091/proxy/" in r.path for r in kube.requests if "/proxy/" in r.path)
    assert proxied == [("GET", "/api/status"), ("GET", "/api/results/files"),
                       *(("GET", f"/api/results/files/{f}") for f in sorted(RESULT_FILES)), ("POST", "/shutdown")]


async def test_profile_keep_sidecar_leaves_it_serving(aiperf: Run, kube: FakeKube, tmp_path: Path) -> None:
    result, pod, fake = await _profile_until_the_control_plane_exits(aiperf, kube, tmp_path, 0, "--keep-sidecar")
    assert result.code == 0, result.err
    assert fake.shutdowns == 0 and f"`aiperf kube shutdown demo -n {NS}` retires it" in result.out
    again = await aiperf("kube", "results", "demo", "--from-pods", "--artifact-dir", str(tmp_path / "again"),
                         *kube_args(kube))
    assert again.code == 0, again.err


async def test_profile_of_a_failed_run_exits_1(aiperf: Run, kube: FakeKube, tmp_path: Path) -> None:
    result, _pod, fake = await _profile_until_the_control_plane_exits(aiperf, kube, tmp_path, 1)
    assert result.code == 1
    assert result.err.endswith("error: run demo failed (its control plane exited 1); "
                               "see `aiperf kube logs demo -n bench`\n")
    assert (tmp_path / "demo" / "profile_export_aiperf.json").exists()  # partial results still fetched
    assert fake.shutdowns == 1


# -- generate and --dry-run ---------------------------------------------------------------------

async def test_dry_run_prints_exactly_what_generate_prints_and_touches_no_api(aiperf: Run,
                                                                            kube: FakeKube) -> None:
    flags = [*BENCH, *kube_args(kube, "--name", "demo", "--total-workers", "25", "--labels.team", "perf",
                                "--env-from-secrets.HF_TOKEN", "hf/token", "--tolerations",
                                "dedicated=bench:NoSchedule", "--image-pull-secrets", "regcred")]
    generated = await aiperf("kube", "generate", *flags)
    dry = await aiperf("kube", "profile", *flags, "--dry-run")
    assert generated.code == dry.code == 0
    assert generated.out.encode() == dry.out.encode()
    assert kube.requests == []
    kinds = [(d["kind"], d["metadata"]["name"], d["metadata"]["namespace"])
             for d in yaml.safe_load_all(generated.out)]
    assert kinds == [("ServiceAccount", "aiperf-demo", NS), ("Role", "aiperf-demo", NS),
                     ("RoleBinding", "aiperf-demo", NS), ("Secret", "aiperf-demo-curve", NS),
                     ("ConfigMap", "aiperf-demo-config", NS), ("JobSet", "aiperf-demo", NS)]
    (secret,) = (d for d in yaml.safe_load_all(generated.out) if d["kind"] == "Secret")
    assert "data" not in secret  # keys are generated by `kube profile` only, never printed


async def test_generate_to_a_file(aiperf: Run, tmp_path: Path) -> None:
    out = tmp_path / "run.yaml"
    result = await aiperf("kube", "generate", *BENCH, "--name", "demo", "-n", NS, "--output", str(out))
    assert (result.code, result.out, result.err) == (0, "", f"wrote {out}\n")
    printed = await aiperf("kube", "generate", *BENCH, "--name", "demo", "-n", NS)
    assert out.read_text() == printed.out


async def test_issuing_and_aggregation_flags_reach_the_run_config_and_the_aiperfjob(aiperf: Run,
                                                                                tmp_path: Path) -> None:
    """`--issuing per_pod --aggregation sharded` (docs/scale.md) set the benchmark's runtime in
    direct mode (the ConfigMap's run config) and in operator mode (the AIPerfJob's benchmark);
    sharded with --slice-duration is one line, exit 2."""
    base = [*BENCH, "--name", "demo", "-n", NS, "--issuing", "per_pod", "--aggregation", "sharded"]
    direct = await aiperf("kube", "generate", *base)
    assert direct.code == 0, direct.err
    (config_map,) = (d for d in yaml.safe_load_all(direct.out) if d["kind"] == "ConfigMap")
    runtime = json.loads(config_map["data"]["run_config.json"])["benchmark"]["runtime"]
    assert (runtime["issuing"], runtime["aggregation"]) == ("per_pod", "sharded"), runtime
    job = await aiperf("kube", "generate", *base, "--operator")
    assert job.code == 0, job.err
    runtime = yaml.safe_load(job.out)["spec"]["benchmark"]["runtime"]
    assert (runtime["issuing"], runtime["aggregation"]) == ("per_pod", "sharded"), runtime
    refused = await aiperf("kube", "generate", *base, "--slice-duration", "1")
    assert refused.code == 2 and refused.err.count("\n") == 1 and "--aggregation sharded" in refused.err, refused.err
    config = tmp_path / "run.yaml"  # the same keys in a `kube init` config file
    config.write_text("issuing: per_pod\naggregation: sharded\n")
    from_file = await aiperf("kube", "generate", *BENCH, "--name", "demo", "-n", NS, "--config", str(config))
    assert from_file.code == 0 and from_file.out == direct.out, from_file.err


async def test_mapping_flags_in_all_three_forms_give_the_same_manifests(aiperf: Run) -> None:
    base = [*BENCH, "--name", "demo", "-n", NS]
    forms = [
        ["--labels.team", "perf", "--env-vars.LOG_FORMAT", "json", "--node-selector.pool", "bench",
         "--annotations.owner=me", "--env-from-secrets.HF_TOKEN", "hf/token"],
        ["--labels", "team=perf", "--env-vars", "LOG_FORMAT=json", "--node-selector", "pool=bench",
         "--annotations", "owner=me", "--env-from-secrets", "HF_TOKEN=hf/token"],
        ["--labels", '{"team": "perf"}', "--env-vars", '{"LOG_FORMAT": "json"}', "--node-selector",
         '{"pool": "bench"}', "--annotations", '{"owner": "me"}', "--env-from-secrets",
         '{"HF_TOKEN": "hf/token"}'],
    ]
    outputs = [await aiperf("kube", "generate", *base, *form) for form in forms]
    assert [o.code for o in outputs] == [0, 0, 0]
    assert outputs[0].out == outputs[1].out == outputs[2].out
    (jobset,) = (d for d in yaml.safe_load_all(outputs[0].out) if d["kind"] == "JobSet")
    assert jobset["metadata"]["labels"]["team"] == "perf"
    assert jobset["metadata"]["annotations"] == {"owner": "me"}
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "bench"}
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["LOG_FORMAT"]["value"] == "json"
    assert env["HF_TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": "hf", "key": "token"}}


async def test_headers_fail_closed_without_a_secret_mapping(aiperf: Run) -> None:
    base = [*BENCH, "--name", "demo", "-n", NS, "--header", "X-Tenant: tenant-secret-value"]
    result = await aiperf("kube", "generate", *base)
    assert result.code == 2 and result.out == ""
    assert result.err == ("error: the run sends headers X-Tenant but no Secret supplies AIPERF_HEADERS_JSON: "
                          "store their JSON object in a Secret and pass --headers-secret SECRET/KEY\n")
    for mapping in (["--headers-secret", "hdrs/json"],
                    ["--env-from-secrets.AIPERF_HEADERS_JSON", "hdrs/json"]):
        ok = await aiperf("kube", "generate", *base, *mapping)
        assert ok.code == 0, ok.err
        assert "tenant-secret-value" not in ok.out
        assert "X-Tenant" in ok.out and "name: hdrs" in ok.out


async def test_api_key_fails_closed_and_never_appears(aiperf: Run) -> None:
    base = [*BENCH, "--name", "demo", "-n", NS, "--api-key", "sk-very-secret"]
    result = await aiperf("kube", "generate", *base)
    assert result.code == 2 and "--api-key-secret SECRET/KEY" in result.err
    ok = await aiperf("kube", "generate", *base, "--api-key-secret", "llm/key")
    assert ok.code == 0 and "sk-very-secret" not in ok.out


async def test_bad_mapping_and_toleration_values_are_one_line_usage_errors(aiperf: Run) -> None:
    base = [*BENCH, "--name", "demo", "-n", NS]
    for bad, start in ((["--labels", "team"], "error: --labels 'team': expected KEY=VALUE"),
                       (["--labels."], "error: --labels.: the key after"),
                       (["--tolerations", "a=b:Maybe"], "error: --tolerations 'a=b:Maybe': effect must be"),
                       (["--env-from-secrets.X", "no-slash"],
                        "error: --env-from-secrets X 'no-slash': expected SECRET/KEY")):
        result = await aiperf("kube", "generate", *base, *bad)
        assert result.code == 2, bad
        assert result.err.startswith(start) and result.err.count("\n") == 1, result.err


# -- list, logs, results, cancel, delete ---------------------------------------------------------

async def test_list_shows_the_run(aiperf: Run, kube: FakeKube) -> None:
    empty = await aiperf("kube", "list", *kube_args(kube))
    assert (empty.code, empty.out) == (0, f"no aiperf runs in namespace {NS}\n")
    await start_detached(aiperf, kube)
    result = await aiperf("kube", "list", *kube_args(kube))
    assert result.code == 0
    header, row = result.out.splitlines()
    assert header.split() == ["NAME", "STATE", "AGE"]
    assert row.split()[:2] == ["demo", "Running"] and row.split()[2].endswith("s")
    everywhere = await aiperf("kube", "list", "--kubeconfig", kube.kubeconfig_path, "-A")
    assert everywhere.out.splitlines()[1].split()[:3] == [NS, "demo", "Running"]


async def test_cancel_sends_a_uid_fenced_json_patch(aiperf: Run, kube: FakeKube) -> None:
    await start_detached(aiperf, kube)
    uid = kube.get(JS_API, "JobSet", NS, "aiperf-demo")["metadata"]["uid"]  # type: ignore[index]
    result = await aiperf("kube", "cancel", "demo", *kube_args(kube))
    assert result.code == 0, result.err
    assert result.out.startswith("cancelled run demo: JobSet aiperf-demo suspended")
    (patch,) = kube.requests_for("PATCH")
    assert (patch.path, patch.content_type) == (f"{JS_PATH}/aiperf-demo", "application/json-patch+json")
    assert patch.body[0] == {"op": "test", "path": "/metadata/uid", "value": uid}
    assert patch.body[1] == {"op": "add", "path": "/spec/suspend", "value": True}
    listed = await aiperf("kube", "list", *kube_args(kube))
    assert listed.out.splitlines()[1].split()[:2] == ["demo", "Suspended"]
    missing = await aiperf("kube", "cancel", "other", *kube_args(kube))
    assert (missing.code, missing.err) == (2, "error: no run other in namespace bench (JobSet aiperf-other "
                                              "not found)\n")


async def test_delete_removes_the_six_objects(aiperf: Run, kube: FakeKube) -> None:
    await start_detached(aiperf, kube)
    result = await aiperf("kube", "delete", "demo", *kube_args(kube))
    assert result.code == 0, result.err
    assert result.out == ("deleted JobSet/aiperf-demo, ConfigMap/aiperf-demo-config, "
                          "Secret/aiperf-demo-curve, RoleBinding/aiperf-demo, "
                          "Role/aiperf-demo, ServiceAccount/aiperf-demo in namespace bench\n")
    assert [r.path for r in kube.requests_for("DELETE")] == [
        f"{JS_PATH}/aiperf-demo", f"/api/v1/namespaces/{NS}/configmaps/aiperf-demo-config",
        f"/api/v1/namespaces/{NS}/secrets/aiperf-demo-curve",
        f"{RBAC_PATH}/rolebindings/aiperf-demo", f"{RBAC_PATH}/roles/aiperf-demo",
        f"/api/v1/namespaces/{NS}/serviceaccounts/aiperf-demo"]
    assert [k for k, _ in kube.store.all_objects() if k[1] not in ("namespaces", "customresourcedefinitions")] == []
    again = await aiperf("kube", "delete", "demo", *kube_args(kube))
    assert again.code == 2 and again.err.startswith("error: no run demo in namespace bench")


async def test_logs_default_to_the_control_plane(aiperf: Run, kube: FakeKube) -> None:
    pod = add_controller_pod(kube)
    kube.set_pod_log(NS, pod, "one\ntwo\nthree\n", container="control-plane")
    kube.set_pod_log(NS, pod, "api says hi\n", container="api")
    result = await aiperf("kube", "logs", "demo", *kube_args(kube))
    assert (result.code, result.out) == (0, "one\ntwo\nthree\n")
    assert kube.requests[-1].query == {"container": "control-plane"}
    tail = await aiperf("kube", "logs", "demo", "--container", "api", "--tail", "1", *kube_args(kube))
    assert tail.out == "api says hi\n" and kube.requests[-1].query == {"container": "api", "tailLines": "1"}
    by_pod = await aiperf("kube", "logs", "demo", "--pod", pod, "--container", "api", *kube_args(kube))
    assert by_pod.out == "api says hi\n"
    none = await aiperf("kube", "logs", "other", *kube_args(kube))
    assert none.code == 2 and none.err.startswith("error: no controller pod for run other in namespace bench")


async def test_results_from_pods(aiperf: Run, kube: FakeKube, tmp_path: Path) -> None:
    _pod, fake = finished_run(kube)
    refused = await aiperf("kube", "results", "demo", *kube_args(kube))
    assert refused.code == 2 and "pass --from-pods" in refused.err
    result = await aiperf("kube", "results", "demo", "--from-pods", "--artifact-dir", str(tmp_path),
                          *kube_args(kube))
    assert result.code == 0, result.err
    assert {p.name: p.read_bytes() for p in (tmp_path / "demo").iterdir()} == RESULT_FILES
    assert fake.shutdowns == 0  # results never retire the sidecar: `kube shutdown` does


async def test_results_when_the_sidecar_is_gone_is_a_cluster_failure(aiperf: Run, kube: FakeKube,
                                                                     tmp_path: Path) -> None:
    pod, _fake = finished_run(kube)
    kube.end_container(NS, pod, "results-sidecar")  # shut down, or its linger time is over
    result = await aiperf("kube", "results", "demo", "--from-pods", "--artifact-dir", str(tmp_path),
                          *kube_args(kube))
    assert result.code == 1 and result.err.startswith("error: reading /api/status from the results sidecar of pod")
    assert result.err.count("\n") == 1


async def test_shutdown_retires_a_finished_runs_sidecar_only(aiperf: Run, kube: FakeKube) -> None:
    add_jobset(kube)
    pod = add_controller_pod(kube)
    fake = FakeSidecar(RESULT_FILES, kube=kube, namespace=NS, pod=pod)
    kube.register_proxy(NS, pod, 9091, fake)
    running = await aiperf("kube", "shutdown", "demo", *kube_args(kube))
    assert running.code == 1 and running.err.startswith(f"error: run demo is still going (the control plane of pod {pod}")
    kube.end_container(NS, pod, "control-plane")
    done = await aiperf("kube", "shutdown", "demo", *kube_args(kube))
    assert (done.code, done.out) == (0, f"results sidecar of pod {pod} shut down; run demo's controller pod completes\n")
    assert fake.shutdowns == 1
    assert [r.method for r in kube.requests if "/proxy/" in r.path] == ["POST"]
    again = await aiperf("kube", "shutdown", "demo", *kube_args(kube))
    assert (again.code, again.out) == (0, f"results sidecar of pod {pod} had already exited\n")
    none = await aiperf("kube", "shutdown", "other", *kube_args(kube))
    assert none.code == 2 and none.err.startswith("error: no controller pod for run other")


# -- connection errors ---------------------------------------------------------------------------

async def test_missing_kubeconfig_is_a_user_error(aiperf: Run, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    result = await aiperf("kube", "list", "--kubeconfig", str(tmp_path / "nope"))
    assert (result.code, result.err) == (2, f"error: kubeconfig {tmp_path / 'nope'} not found; pass "
                                            "--kubeconfig PATH to an existing file\n")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    result = await aiperf("kube", "profile", *BENCH, "--name", "demo", "--detach")
    assert result.code == 2 and result.err.startswith("error: no kubeconfig found at ")


async def test_an_unreachable_api_server_is_a_cluster_failure(aiperf: Run, tmp_path: Path) -> None:
    async with FakeKube() as gone:
        config = str(gone.write_kubeconfig(tmp_path / "config"))
    result = await aiperf("kube", "list", "--kubeconfig", config)
    assert result.code == 1
    assert result.err.startswith("error: cannot reach the Kubernetes API server at http://127.0.0.1:")
    assert result.err.count("\n") == 1


# -- preflight -----------------------------------------------------------------------------------

async def test_preflight_passes_on_a_ready_cluster(aiperf: Run, kube: FakeKube) -> None:
    kube.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "llm", "namespace": NS},
                 "data": {"api-key": "c2VjcmV0"}})
    kube.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "regcred", "namespace": NS},
                 "data": {}})
    result = await aiperf("kube", "preflight", *kube_args(kube), "--env-from-secrets.OPENAI_API_KEY",
                          "llm/api-key", "--image-pull-secrets", "regcred")
    assert result.code == 0, result.out
    lines = result.out.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "PASS  kubeconfig", "PASS  api server", f"PASS  namespace {NS}", "PASS  JobSet API",
        "PASS  secret llm key api-key (--env-from-secrets OPENAI_API_KEY)",
        "PASS  secret regcred (--image-pull-secrets)"]


async def test_preflight_reports_each_failure(aiperf: Run, kube: FakeKube) -> None:
    kube.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "llm", "namespace": NS},
                 "data": {"other": "eA=="}})
    result = await aiperf("kube", "preflight", *kube_args(kube), "--api-key-secret", "llm/api-key",
                          "--headers-secret", "hdrs/json")
    assert result.code == 1
    assert result.out.splitlines()[-2:] == [
        "FAIL  secret llm key api-key (--api-key-secret): Secret llm has no key api-key (keys: other)",
        "FAIL  secret hdrs key json (--headers-secret): no Secret hdrs in namespace bench"]
    absent = await aiperf("kube", "preflight", "--kubeconfig", kube.kubeconfig_path, "-n", "absent")
    assert absent.code == 1
    assert "FAIL  namespace absent: namespace absent does not exist" in absent.out
    kube.delete_crd("jobsets.jobset.x-k8s.io")  # a cluster without JobSet
    no_jobset = await aiperf("kube", "preflight", *kube_args(kube))
    assert no_jobset.code == 1
    assert "FAIL  JobSet API: jobset.x-k8s.io/v1alpha2 not installed; install JobSet first" in no_jobset.out


async def test_preflight_without_a_kubeconfig(aiperf: Run, tmp_path: Path) -> None:
    result = await aiperf("kube", "preflight", "--kubeconfig", str(tmp_path / "nope"))
    assert result.code == 1
    assert result.out.startswith("FAIL  kubeconfig: kubeconfig ")
    assert json.dumps(result.out).count("\\n") == 1
