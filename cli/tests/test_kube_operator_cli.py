"""Operator mode of `aiperf kube`, offline: `generate --operator` prints the run's AIPerfJob (the
same benchmark direct mode would run, valid for the CRD), `validate FILE...` checks CR files with
the CRD's schema and CEL rules, one line per problem."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from aiperf.cli.kube_operator import compact
from aiperf.config import Benchmark, ConcurrencyPhase, PoissonPhase, decode_benchmark
from aiperf.crd.model import decode_spec
from aiperf.crd.validation import validate_resource
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio

NS = "bench"
BENCH = ("--model", "Qwen/Qwen3-0.6B", "--url", "http://vllm.llm.svc:8000", "--concurrency", "8",
         "--request-count", "80")
DEPLOY = ("--name", "demo", "-n", NS, "--total-workers", "25", "--workers-per-pod", "5", "--labels.team", "perf",
          "--env-vars.LOG_FORMAT", "json", "--env-from-secrets.HF_TOKEN", "hf/token", "--tolerations",
          "dedicated=bench:NoSchedule", "--image-pull-secrets", "regcred", "--node-selector.pool", "bench",
          "--ttl-seconds", "60", "--log-level", "debug")
Run = Callable[..., Awaitable[Any]]


async def test_generate_operator_prints_the_runs_aiperfjob(aiperf: Run, kube: FakeKube) -> None:
    result = await aiperf("kube", "generate", *BENCH, *DEPLOY, "--operator", "--kubeconfig", kube.kubeconfig_path)
    assert result.code == 0, result.err
    assert kube.requests == []
    (job,) = list(yaml.safe_load_all(result.out))
    assert (job["apiVersion"], job["kind"], job["metadata"]) == (
        "aiperf.nvidia.com/v1alpha1", "AIPerfJob", {"name": "demo", "namespace": NS, "labels": {"team": "perf"}})
    assert validate_resource(job) == []
    spec = job["spec"]
    body = spec["benchmark"]
    assert body["runtime"] == {"workers": 25, "ui": "none", "workersPerPod": 5}
    assert body["logging"] == {"level": "DEBUG"} and body["models"] == {"items": [{"name": "Qwen/Qwen3-0.6B"}]}
    assert [p["name"] for p in body["phases"]] == ["profiling"] and body["datasets"][0]["name"] == "main"
    assert (spec["ttlSecondsAfterFinished"], spec["imagePullPolicy"]) == (60, "IfNotPresent")
    assert not {"workersPerPod", "logLevel", "secrets"} & set(spec)  # AIPerf's envelope: its validate accepts it
    assert spec["podTemplate"] == {
        "nodeSelector": {"pool": "bench"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "bench", "effect": "NoSchedule"}],
        "imagePullSecrets": [{"name": "regcred"}], "labels": {"team": "perf"},
        "env": [{"name": "LOG_FORMAT", "value": "json"},
                {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}]}


async def test_generate_operator_names_the_endpoint_secrets_as_aiperf_does(aiperf: Run) -> None:
    result = await aiperf("kube", "generate", *BENCH, *DEPLOY, "--operator", "--api-key", "sk-1",
                          "--api-key-secret", "llm/key", "--header", "X-Tenant:t1", "--headers-secret", "llm/headers")
    assert result.code == 0, result.err
    assert "sk-1" not in result.out and "t1" not in result.out
    spec = yaml.safe_load(result.out)["spec"]
    assert spec["benchmark"]["endpoint"]["apiKey"] == "<redacted>"
    env = {e["name"]: e.get("valueFrom") for e in spec["podTemplate"]["env"]}
    assert env["AIPERF_INJECTED_API_KEY"] == {"secretKeyRef": {"name": "llm", "key": "key"}}
    assert env["AIPERF_INJECTED_HEADERS"] == {"secretKeyRef": {"name": "llm", "key": "headers"}}
    decoded = decode_spec(spec, "AIPerfJob")
    assert (decoded.api_key_secret.name, decoded.headers_secret.key) == ("llm", "headers")


async def test_the_aiperfjob_runs_the_benchmark_direct_mode_runs(aiperf: Run) -> None:
    direct = await aiperf("kube", "generate", *BENCH, *DEPLOY)
    operator = await aiperf("kube", "generate", *BENCH, *DEPLOY, "--operator")
    assert direct.code == operator.code == 0, (direct.err, operator.err)
    config_map = next(d for d in yaml.safe_load_all(direct.out) if d["kind"] == "ConfigMap")
    run_config = json.loads(next(iter(config_map["data"].values())))
    expected = msgspec.convert(run_config["benchmark"], Benchmark)
    expected = msgspec.structs.replace(
        expected, runtime=msgspec.structs.replace(expected.runtime, workers=25, workers_per_pod=5),
        logging=msgspec.structs.replace(expected.logging, level="debug"))
    (job,) = list(yaml.safe_load_all(operator.out))
    assert decode_spec(job["spec"], "AIPerfJob").benchmark == expected


def test_a_job_with_user_files_carries_their_variables() -> None:
    from aiperf.cli.kube_deploy import Deployment
    from aiperf.cli.kube_operator import build_job
    from aiperf.config.loader import normalize
    from aiperf.config.templating import render_document
    from aiperf.kube import KubeSettings

    document, _ = normalize(render_document({"variables": {"n": 2, "total": "{{ n * 4 }}"}, "benchmark": {
        "model": "m", "profiling": {"type": "concurrency", "concurrency": "{{ total }}", "requests": 10},
        "artifacts": {"userFiles": [{"path": "run.json", "content": {"total": "{{ total }}"}}]}}}, {}))
    benchmark = decode_benchmark(document)
    settings = KubeSettings(name="demo", namespace=NS, total_workers=1)
    job = build_job(Deployment(settings=settings, benchmark=benchmark, objects=[], yaml=""))
    assert job["spec"]["variables"] == {"n": 2, "total": 8}
    assert job["spec"]["benchmark"]["phases"][0]["concurrency"] == 8  # rendered when read
    assert job["spec"]["benchmark"]["artifacts"]["userFiles"] == [
        {"path": "run.json", "format": "json", "content": {"total": "{{ total }}"}}]  # rendered at the run's start
    assert validate_resource(job) == []
    decoded = decode_spec(job["spec"], "AIPerfJob").benchmark
    assert (decoded.variables, decoded.artifacts.user_files) == (benchmark.variables, benchmark.artifacts.user_files)


async def test_generate_operator_to_a_file(aiperf: Run, tmp_path: Path) -> None:
    out = tmp_path / "job.yaml"
    written = await aiperf("kube", "generate", *BENCH, *DEPLOY, "--operator", "--output", str(out))
    assert (written.code, written.out, written.err) == (0, "", f"wrote {out}\n")
    printed = await aiperf("kube", "generate", *BENCH, *DEPLOY, "--operator")
    assert out.read_text() == printed.out


async def test_generate_operator_refuses_per_service_images_in_one_line(aiperf: Run) -> None:
    result = await aiperf("kube", "generate", *BENCH, *DEPLOY, "--operator", "--image-tag", "0.2.0")
    assert result.code == 2 and result.out == ""
    assert result.err.count("\n") == 1 and result.err.startswith("error: --image-registry/--image-tag")


@pytest.mark.parametrize("benchmark", [
    Benchmark(models=["m"]),
    Benchmark(models=["m"], phases=[ConcurrencyPhase(name="warmup", requests=5, concurrency=2),
                                    PoissonPhase(rate=4.0, duration=30.0)], slos={"time_to_first_token": 200.0}),
])
def test_compact_leaves_out_defaults_and_decodes_back_equal(benchmark: Benchmark) -> None:
    doc = compact(benchmark)
    assert decode_benchmark(doc) == benchmark
    assert "tokenizer" not in doc and "artifacts" not in doc


# -- validate -------------------------------------------------------------------------------------

async def _job(aiperf: Run) -> dict[str, Any]:
    result = await aiperf("kube", "generate", *BENCH, *DEPLOY, "--operator")
    job: dict[str, Any] = yaml.safe_load(result.out)
    return job


async def test_validate_accepts_valid_documents(aiperf: Run, tmp_path: Path) -> None:
    job = await _job(aiperf)
    sweep = {**job, "kind": "AIPerfSweep", "metadata": {"name": "rates"},
             "spec": {"benchmark": job["spec"]["benchmark"],
                      "sweep": {"parameters": {"phases.profiling.concurrency": [1, 2]}}}}
    path = tmp_path / "crs.yaml"
    path.write_text(yaml.safe_dump_all([job, sweep]))
    result = await aiperf("kube", "validate", str(path))
    assert (result.code, result.err) == (0, "")
    assert result.out.splitlines() == [f"{path}: AIPerfJob/demo: valid", f"{path}: AIPerfSweep/rates: valid"]


async def test_validate_prints_one_line_per_problem_and_exits_1(aiperf: Run, tmp_path: Path) -> None:
    job = await _job(aiperf)
    job["spec"]["benchmark"]["phases"] = [{"type": "concurrency", "name": "steady", "requests": 5}]
    job["spec"]["connectionsPerWorker"] = 0
    job["spec"]["podTemplate"]["colour"] = "blue"
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(yaml.safe_dump(await _job(aiperf)))
    bad.write_text(yaml.safe_dump(job))
    result = await aiperf("kube", "validate", str(good), str(bad))
    assert result.code == 1 and result.err == ""
    lines = result.out.splitlines()
    assert lines[0] == f"{good}: AIPerfJob/demo: valid"
    assert sorted(lines[1:]) == sorted([
        f"{bad}: AIPerfJob/demo: spec.benchmark.phases[0].kind: required for the custom phase name 'steady' "
        "(warmup or profiling)",
        f"{bad}: AIPerfJob/demo: spec.podTemplate: unknown field(s) 'colour'",
        f"{bad}: AIPerfJob/demo: spec.connectionsPerWorker: 0 is less than the minimum of 1"])


async def test_validate_json_gives_one_object_per_problem(aiperf: Run, tmp_path: Path) -> None:
    job = await _job(aiperf)
    job["spec"]["resourceMode"] = "besteffort"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(job))
    result = await aiperf("kube", "validate", str(path), "-o", "json")
    assert result.code == 1
    (line,) = result.out.splitlines()
    assert json.loads(line) == {"file": str(path), "document": 0, "resource": "AIPerfJob/demo",
                                "path": "spec.resourceMode",
                                "message": "'besteffort' is not one of ['burstable', 'guaranteed', 'none']"}


@pytest.mark.parametrize(("content", "message"), [
    (None, "cannot read the file"),
    ("kind: [unclosed\n", "not valid YAML (line 2)"),
])
async def test_validate_reports_an_unreadable_file_in_one_line_and_exits_2(aiperf: Run, tmp_path: Path,
                                                                          content: str | None, message: str) -> None:
    path = tmp_path / "cr.yaml"
    if content is not None:
        path.write_text(content)
    result = await aiperf("kube", "validate", str(path))
    assert result.code == 2 and result.err == ""
    (line,) = result.out.splitlines()
    assert line.startswith(f"{path}: ?: {message}")


async def test_validate_names_a_document_of_another_kind(aiperf: Run, tmp_path: Path) -> None:
    path = tmp_path / "cm.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    result = await aiperf("kube", "validate", str(path), "-o", "json")
    assert result.code == 1
    problems = [json.loads(line) for line in result.out.splitlines()]
    assert {p["path"] for p in problems} == {"apiVersion", "kind"}
