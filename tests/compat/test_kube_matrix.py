"""`aiperf kube generate` against AIPerf 0.13.0's, both ways, for a matrix of flag sets (load
modes, datasets, endpoints, sweeps, repeated runs, secrets, pod settings):

- AIPerf's `kube generate --operator` output passes our `kube validate` and plans the same run as
  ours from the same flags (the benchmark, value by value; the workers and pods; image, pod
  template, Secret references; a sweep's variations and trials);
- ours passes AIPerf's `kube validate` (one call for every file, its JSON verdicts);
- `--no-operator` (direct mode, single runs): the ConfigMap's benchmark and the JobSet's worker
  pods are the same run as AIPerf's.

Each flag set is given to both tools as written (the flags both spell the same way)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from _oracle import Oracle, comparable, find_oracle

from aiperf.cli.main import main
from aiperf.crd.model import SWEEP_KIND, AIPerfSweepSpec, decode_spec
from aiperf.crd.validation import validate_resource
from aiperf.kuberun.sweep_plan import plan_of

BASE = ["-n", "bench", "--model", "Qwen/Qwen3-0.6B", "--url", "http://vllm.llm.svc:8000"]

MATRIX: list[tuple[str, list[str]]] = [
    ("closed-loop", ["--endpoint-type", "chat", "--streaming", "--concurrency", "64", "--request-count", "2000",
                     "--isl", "512", "--osl", "128"]),
    ("poisson", ["--request-rate", "10", "--request-count", "100"]),
    ("constant-capped", ["--request-rate", "20", "--request-rate-mode", "constant", "--concurrency", "8",
                         "--request-count", "50"]),
    ("gamma-duration", ["--request-rate", "5", "--arrival-pattern", "gamma", "--arrival-smoothness", "2.0",
                        "--benchmark-duration", "30"]),
    ("duration-grace", ["--concurrency", "4", "--benchmark-duration", "60", "--benchmark-grace-period", "10"]),
    ("warmup", ["--warmup-request-count", "20", "--concurrency", "8", "--request-count", "100"]),
    ("multi-url", ["--url", "http://vllm-2.llm.svc:8000", "http://vllm-3.llm.svc:8000/v1", "--concurrency", "12",
                   "--request-count", "60"]),
    ("completions", ["--endpoint-type", "completions", "--streaming", "--request-count", "20"]),
    ("embeddings", ["--endpoint-type", "embeddings", "--request-count", "20"]),
    ("length-spread", ["--isl", "256", "--isl-stddev", "32", "--osl", "64", "--osl-stddev", "8"]),
    ("dataset-entries", ["--num-dataset-entries", "500", "--random-seed", "7"]),
    ("multi-turn", ["--conversation-turn-mean", "3", "--conversation-turn-stddev", "1",
                    "--conversation-turn-delay-mean", "500", "--conversation-turn-delay-stddev", "100"]),
    ("prefix-prompts", ["--num-prefix-prompts", "4", "--prefix-prompt-length", "64"]),
    ("concurrency-ramp", ["--concurrency", "32", "--concurrency-ramp-duration", "10", "--request-count", "200"]),
    ("rate-ramp", ["--request-rate", "20", "--request-rate-ramp-duration", "5", "--request-count", "100"]),
    ("prefill", ["--streaming", "--concurrency", "16", "--prefill-concurrency", "4",
                 "--prefill-concurrency-ramp-duration", "5", "--request-count", "100"]),
    ("cancellation", ["--request-cancellation-rate", "10", "--request-cancellation-delay", "0.5",
                      "--request-count", "40"]),
    ("goodput", ["--goodput", "time_to_first_token:200 request_latency:1000", "--streaming"]),
    ("extra-inputs-timeout", ["--extra-inputs", "temperature:0.5", "--extra-inputs", "top_p:0.9",
                              "--request-timeout-seconds", "60", "--use-legacy-max-tokens"]),
    ("server-metrics", ["--server-metrics", "http://vllm.llm.svc:8000/metrics", "http://router:9090/metrics"]),
    ("no-server-metrics", ["--no-server-metrics"]),
    ("total-workers", ["--total-workers", "20", "--concurrency", "200", "--request-count", "2000"]),
    ("many-workers-derived", ["--concurrency", "1500", "--request-count", "3000"]),
    ("pod-settings", ["--node-selector", "pool=bench", "--tolerations",
                      '{"key": "dedicated", "operator": "Equal", "value": "bench", "effect": "NoSchedule"}',
                      "--image-pull-secrets", "regcred", "--labels", "team=perf", "--annotations", "example.com/o=perf",
                      "--service-account", "aiperf-runner", "--image", "registry.example.com/aiperf/all:0.1.0",
                      "--image-pull-policy", "always", "--ttl-seconds", "60"]),
    ("env-and-secrets", ["--env-vars", "LOG_FORMAT=json", "--env-from-secrets", "HF_TOKEN=hf/token",
                         "--api-key", "sk-test", "--env-from-secrets", "AIPERF_INJECTED_API_KEY=llm-api/api-key"]),
    # issue 25's flag groups: warmup variants, custom endpoint, session and prefix aliases, exports
    ("warmup-variants", ["--concurrency", "8", "--request-count", "100", "--warmup-request-count", "20",
                         "--warmup-concurrency", "4", "--warmup-concurrency-ramp-duration", "2"]),
    ("warmup-rate-duration", ["--request-rate", "10", "--request-count", "50", "--warmup-duration", "5",
                              "--warmup-grace-period", "2", "--warmup-request-rate", "20",
                              "--warmup-arrival-pattern", "constant"]),
    ("warmup-from-rate", ["--request-rate", "10", "--arrival-pattern", "gamma", "--arrival-smoothness", "2",
                          "--request-count", "50", "--warmup-request-count", "5"]),
    ("custom-endpoint", ["--custom-endpoint", "/v1/custom", "--url-strategy", "round-robin"]),
    ("session-aliases", ["--session-turns-mean", "3", "--session-turns-stddev", "1", "--session-turn-delay-mean",
                         "200", "--session-delay-ratio", "0.5", "--prompt-prefix-pool-size", "4",
                         "--prompt-prefix-length", "32"]),
    ("exports-telemetry", ["--slice-duration", "5", "--server-metrics-formats", "json", "--gpu-telemetry",
                           "http://dcgm:9400/metrics"]),
    ("no-gpu-telemetry", ["--no-gpu-telemetry"]),
    ("sweep-grid", ["--concurrency", "2,4,8", "--request-count", "40"]),
    ("sweep-zip", ["--isl", "128,256", "--osl", "64,128", "--sweep-type", "zip"]),
    ("sweep-rates", ["--request-rate", "5,10", "--request-count", "50", "--parameter-sweep-cooldown-seconds", "5"]),
    ("repeated-runs", ["--num-profile-runs", "3", "--profile-run-cooldown-seconds", "10", "--confidence-level",
                       "0.9", "--concurrency", "8", "--request-count", "80"]),
    ("sweep-prefill", ["--streaming", "--concurrency", "16", "--prefill-concurrency", "2,4,8",
                       "--request-count", "60"]),
    ("sweep-and-trials", ["--concurrency", "4,16", "--num-profile-runs", "2", "--request-count", "60"]),
    ("prompt-batch", ["--endpoint-type", "embeddings", "--prompt-batch-size", "8", "--request-count", "20"]),
    ("user-centric", ["--streaming", "--user-centric-rate", "2", "--num-users", "8", "--benchmark-duration", "60",
                      "--conversation-turn-mean", "4"]),
    ("sticky-sessions", ["--connection-reuse-strategy", "sticky-user-sessions", "--conversation-turn-mean", "3",
                         "--concurrency", "4", "--request-count", "30"]),
    ("several-models", ["--model", "Qwen/Qwen3-8B,meta-llama/Llama-3.1-8B", "--model-selection-strategy", "random",
                        "--request-count", "30"]),
    ("several-models-rr", ["--model", "Qwen/Qwen3-8B", "--model-selection-strategy", "round_robin"]),
    ("no-connection-reuse", ["--connection-reuse-strategy", "never", "--request-count", "20"]),
    ("http-trace", ["--export-http-trace", "--show-trace-timing", "--streaming", "--request-count", "20"]),
    ("images", ["--image-batch-size", "2", "--image-width-mean", "256", "--image-width-stddev", "16",
                "--image-height-mean", "128", "--image-format", "png", "--request-count", "20"]),
    ("audio", ["--audio-batch-size", "1", "--audio-length-mean", "5", "--audio-length-stddev", "1",
               "--audio-sample-rates", "16", "--audio-sample-rates", "44.1", "--audio-depths", "16", "--audio-depths", "24",
               "--audio-num-channels", "2",
               "--request-count", "20"]),
]
"""(id, flags) of every flag set; names come from the id."""

DIRECT_MATRIX = [(i, f) for i, f in MATRIX if not any("," in a for a in f) and "--num-profile-runs" not in f]


@pytest.fixture(scope="module")
def oracle() -> Oracle:
    return find_oracle()


def _args(case: str, flags: list[str], *, operator: bool) -> list[str]:
    return ["kube", "generate", "--name", case, *BASE, *flags, "--operator" if operator else "--no-operator"]


def _ours(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    code = main(args)
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def _theirs(oracle: Oracle, args: list[str], cwd: Path) -> str:
    done = oracle.run(*args, cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def plan(cr: dict[str, Any]) -> dict[str, Any]:
    """What a CR makes the operator run: the benchmark's values, the workers and pods, the image,
    the pod template and Secret references; for a sweep its variations and trials."""
    spec = decode_spec(cr["spec"], cr["kind"], environ={})
    template = spec.pod_template
    pod = msgspec.to_builtins(template) if template else {}
    out: dict[str, Any] = {
        "kind": cr["kind"], "benchmark": comparable(msgspec.to_builtins(spec.benchmark)),
        "total_workers": spec.total_workers(), "workers_per_pod": spec.workers_per_pod,
        "image": spec.envelope.image, "pull_policy": spec.envelope.image_pull_policy or "IfNotPresent",
        "ttl": 300 if spec.envelope.ttl_seconds_after_finished is None else spec.envelope.ttl_seconds_after_finished,
        "pod": {k: pod.get(k) for k in ("nodeSelector", "tolerations", "imagePullSecrets", "labels", "annotations",
                                        "serviceAccountName")},
        "env": sorted((e["name"], json.dumps(e.get("value") or e.get("valueFrom"))) for e in pod.get("env", [])
                      if e["name"] not in ("AIPERF_INJECTED_API_KEY", "OPENAI_API_KEY", "AIPERF_INJECTED_HEADERS")),
        "api_key_secret": msgspec.to_builtins(spec.api_key_secret), "uses_api_key": bool(
            (cr["spec"]["benchmark"].get("endpoint") or {}).get("apiKey")),
    }
    if cr["kind"] == SWEEP_KIND:
        assert isinstance(spec, AIPerfSweepSpec)
        sweep_plan = plan_of(spec)
        out["runs"] = [(r.trial, r.variation.label if r.variation else None, r.cooldown_s) for r in sweep_plan.runs]
        out["multi_run"] = msgspec.to_builtins(sweep_plan.multi_run)
        out["variations"] = [v.values for v in sweep_plan.variations]
    return out


@pytest.mark.parametrize(("case", "flags"), MATRIX, ids=[c for c, _ in MATRIX])
def test_aiperfs_cr_passes_our_validate_and_plans_the_same_run_as_ours(
        case: str, flags: list[str], oracle: Oracle, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (theirs,) = list(yaml.safe_load_all(_theirs(oracle, _args(case, flags, operator=True), tmp_path)))
    (ours,) = list(yaml.safe_load_all(_ours(_args(case, flags, operator=True), capsys)))
    assert validate_resource(theirs) == []
    assert validate_resource(ours) == []
    assert plan(theirs) == plan(ours)


def test_our_crs_pass_aiperfs_validate(oracle: Oracle, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = []
    for case, flags in MATRIX:
        path = tmp_path / f"{case}.yaml"
        path.write_text(_ours(_args(case, flags, operator=True), capsys))
        files.append(str(path))
    done = oracle.run("kube", "validate", *files, "-o", "json", cwd=tmp_path)
    verdicts = {Path(r["path"]).stem: r for r in json.loads(done.stdout)}
    assert len(MATRIX) >= 20 and set(verdicts) == {c for c, _ in MATRIX}
    failed = {case: r["errors"] for case, r in verdicts.items() if not r["passed"]}
    assert failed == {} and done.returncode == 0, failed


def _direct_plan(manifests: str, *, benchmark_key: str) -> dict[str, Any]:
    docs = list(yaml.safe_load_all(manifests))
    (config_map,) = (d for d in docs if d["kind"] == "ConfigMap")
    run_config = json.loads(config_map["data"]["run_config.json"])
    (jobset,) = (d for d in docs if d["kind"] == "JobSet")
    pods = workers = 0
    for job in jobset["spec"]["replicatedJobs"]:
        names = [c["name"] for c in job["template"]["spec"]["template"]["spec"]["containers"]]
        count = sum(n.startswith("worker-") and n[len("worker-"):].isdigit() for n in names)
        pods += job.get("replicas", 1) if count else 0
        workers += job.get("replicas", 1) * count
    benchmark = comparable(run_config[benchmark_key])
    del benchmark["artifacts"]  # where a run writes inside its pod: each tool's own
    return {"benchmark": benchmark, "worker_pods": pods, "workers": workers,
            "controller": [j["replicas"] for j in jobset["spec"]["replicatedJobs"] if j["name"] == "controller"]}


@pytest.mark.parametrize(("case", "flags"), DIRECT_MATRIX, ids=[c for c, _ in DIRECT_MATRIX])
def test_direct_mode_manifests_run_the_same_benchmark_on_the_same_pods(
        case: str, flags: list[str], oracle: Oracle, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    theirs = _direct_plan(_theirs(oracle, _args(case, flags, operator=False), tmp_path), benchmark_key="cfg")
    ours = _direct_plan(_ours(_args(case, flags, operator=False), capsys), benchmark_key="benchmark")
    assert ours == theirs
