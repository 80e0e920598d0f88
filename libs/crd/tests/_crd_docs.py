"""Documents the CRD tests share (imported as a top-level test module): a valid AIPerfJob and
AIPerfSweep, and the schema node of each kind."""

from __future__ import annotations

import copy
from typing import Any

from aiperf.crd.generator import build_crd
from aiperf.crd.model import API_GROUP, API_VERSION, JOB_KIND, SWEEP_KIND

BENCHMARK: dict[str, Any] = {
    "models": ["Qwen/Qwen3-0.6B"],
    "endpoint": {"urls": ["http://vllm.llm.svc:8000"], "type": "chat", "streaming": True,
                 "header_names": ["X-Tenant"], "extra": {"temperature": 0.0, "top_k": {"nested": [1]}}},
    "datasets": [{"type": "synthetic", "entries": 50, "prompts": {"isl": {"mean": 128}, "osl": {"mean": 64}}}],
    "phases": [{"type": "concurrency", "name": "warmup", "concurrency": 4, "requests": 20},
               {"type": "poisson", "name": "profiling", "rate": 8.0, "concurrency": 16, "duration": 60,
                "grace_period": 5}],
    "slos": {"time_to_first_token": 200},
}

POD_TEMPLATE: dict[str, Any] = {
    "nodeSelector": {"nvidia.com/gpu.present": "false"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "bench", "effect": "NoSchedule"},
                    {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}],
    "imagePullSecrets": [{"name": "regcred"}],
    "labels": {"team": "perf"},
    "annotations": {"example.com/owner": "perf team"},
    "serviceAccountName": "aiperf-runner",
    "env": [{"name": "AIPERF_LOG_FORMAT", "value": "json"},
            {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}},
            {"name": "AIPERF_INJECTED_API_KEY", "valueFrom": {"secretKeyRef": {"name": "llm-api", "key": "api-key"}}}],
    "volumes": [{"name": "model-cache", "persistentVolumeClaim": {"claimName": "hf-cache"}}],
    "volumeMounts": [{"name": "model-cache", "mountPath": "/models", "readOnly": True}],
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["bench"]}]}]}}},
    "podSecurityContext": {"runAsNonRoot": True, "fsGroup": 1000},
    "containerSecurityContext": {"readOnlyRootFilesystem": True},
    "initContainers": [{"name": "warm-cache", "image": "busybox:1.36", "command": ["true"]}],
    "resources": {"worker": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "1Gi"}}},
}


def job(**spec: Any) -> dict[str, Any]:
    """A valid AIPerfJob (`spec` entries override or add fields)."""
    body = {"benchmark": {**copy.deepcopy(BENCHMARK), "runtime": {"workersPerPod": 10}},
            "image": "registry.example.com/aiperf/all:0.1.0", "imagePullPolicy": "IfNotPresent",
            "resourceMode": "guaranteed", "connectionsPerWorker": 4, "podTemplate": copy.deepcopy(POD_TEMPLATE),
            "ttlSecondsAfterFinished": 300, "timeoutSeconds": 3600, "keepFailedPods": False, "cancel": False}
    body.update(spec)
    return {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": JOB_KIND,
            "metadata": {"name": "llama-c64", "namespace": "bench"}, "spec": body}


def sweep(**spec: Any) -> dict[str, Any]:
    """A valid AIPerfSweep."""
    body = {"benchmark": copy.deepcopy(BENCHMARK),
            "sweep": {"type": "grid", "parameters": {"phases.profiling.rate": [1, 2.5, 8]}, "cooldownSeconds": 10},
            "multiRun": {"numRuns": 3, "cooldownSeconds": 5}, "ttlSecondsAfterFinished": 600}
    body.update(spec)
    return {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": SWEEP_KIND,
            "metadata": {"name": "rate-sweep", "namespace": "bench"}, "spec": body}


def schema_of(kind: str) -> dict[str, Any]:
    """The `openAPIV3Schema` of the generated CRD of `kind`."""
    schema: dict[str, Any] = build_crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def walk(node: dict[str, Any], where: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every (path, node) of a schema, the root first."""
    out = [(where, node)]
    for name, sub in node.get("properties", {}).items():
        out += walk(sub, f"{where}.{name}")
    for key, suffix in (("additionalProperties", ".*"), ("items", "[]")):
        if isinstance(node.get(key), dict):
            out += walk(node[key], where + suffix)
    return out
