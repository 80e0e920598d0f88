"""Validation of generated manifests (imported as a top-level test module).

Three layers: `kubernetes-validate` (official schemas, strict, Kubernetes 1.32) for built-in
kinds and for each JobSet job template wrapped as a batch/v1 Job; our JobSet JSON schema; our own
checks for what schemas miss (names, references, uniqueness, JobSet's admission rules).
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate

from aiperf.kube.names import (
    POD_NAME_SUFFIX,
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_env_name,
    is_port_name,
)

KUBERNETES_VERSION = "1.32.0"
SCHEMA = Path(__file__).parent / "schemas" / "jobset-v1alpha2.json"
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_ARG_VAR = re.compile(r"\$\(([^)]*)\)")


@cache
def _jobset_validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))


def validate_builtin(obj: dict[str, Any]) -> None:
    """Validate a built-in kind strictly against the Kubernetes schema; raises on a problem."""
    kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def validate_jobset(obj: dict[str, Any]) -> None:
    """Validate a JobSet against our schema, and each job template as a batch/v1 Job."""
    _jobset_validator().validate(obj)
    for rjob in obj["spec"]["replicatedJobs"]:
        template = rjob["template"]
        job_name = f"{obj['metadata']['name']}-{rjob['name']}-0"
        job = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {**template.get("metadata", {}), "name": job_name},
               "spec": template["spec"]}
        validate_builtin(job)


def validate_all(objects: list[dict[str, Any]]) -> None:
    """Schema-validate every object (built-ins and JobSets)."""
    for obj in objects:
        if obj["kind"] == "JobSet":
            validate_jobset(obj)
        else:
            validate_builtin(obj)


def problems(objects: list[dict[str, Any]]) -> list[str]:
    """Everything our own checks find wrong with `objects` (empty: fine)."""
    out: list[str] = []
    config_maps = {o["metadata"]["name"] for o in objects if o["kind"] == "ConfigMap"}
    roles = {o["metadata"]["name"] for o in objects if o["kind"] == "Role"}
    for obj in objects:
        out += _meta_problems(obj)
        if obj["kind"] == "RoleBinding":
            out += _binding_problems(obj, roles)
        if obj["kind"] == "JobSet":
            out += _jobset_problems(obj)
            for rjob in obj["spec"]["replicatedJobs"]:
                pod = rjob["template"]["spec"]["template"]["spec"]
                out += [f"{rjob['name']}: {p}" for p in _pod_problems(pod, config_maps)]
    return out


def _meta_problems(obj: dict[str, Any]) -> list[str]:
    meta, kind = obj["metadata"], obj["kind"]
    out = []
    if not is_dns1123_subdomain(meta["name"]):
        out.append(f"{kind} name {meta['name']!r} is not a DNS-1123 subdomain")
    if not is_dns1123_label(meta.get("namespace", "")):
        out.append(f"{kind} namespace {meta.get('namespace')!r} is not a DNS-1123 label")
    for key, value in meta.get("labels", {}).items():
        if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
            out.append(f"{kind} label {key}={value!r}: invalid value")
    return out


def _binding_problems(obj: dict[str, Any], roles: set[str]) -> list[str]:
    ref, out = obj.get("roleRef", {}), []
    if ref.get("apiGroup") != "rbac.authorization.k8s.io":
        out.append("RoleBinding roleRef.apiGroup must be rbac.authorization.k8s.io")
    if ref.get("kind") != "Role" or ref.get("name") not in roles:
        out.append(f"RoleBinding roleRef {ref} names no Role of this run")
    for subject in obj.get("subjects", []):
        if subject.get("kind") == "ServiceAccount" and not subject.get("namespace"):
            out.append("RoleBinding ServiceAccount subject without namespace")
    return out


def _jobset_problems(obj: dict[str, Any]) -> list[str]:
    spec, name, out = obj["spec"], obj["metadata"]["name"], []
    jobs = [r["name"] for r in spec["replicatedJobs"]]
    if len(set(jobs)) != len(jobs):
        out.append(f"replicated job names repeat: {jobs}")
    for target in spec.get("successPolicy", {}).get("targetReplicatedJobs", []):
        if target not in jobs:
            out.append(f"successPolicy targets unknown replicated job {target}")
    subdomain = spec.get("network", {}).get("subdomain", name)
    if not (is_dns1035_label(subdomain) and is_dns1123_subdomain(subdomain)):
        out.append(f"network.subdomain {subdomain!r} is not a DNS-1035 label")
    for rjob in spec["replicatedJobs"]:
        job_spec = rjob["template"]["spec"]
        longest_job = f"{name}-{rjob['name']}-{rjob['replicas'] - 1}"
        longest_pod = f"{longest_job}-{job_spec.get('completions', 1) - 1}{POD_NAME_SUFFIX}"
        for what, value in (("job", longest_job), ("pod", longest_pod)):
            if not is_dns1035_label(value):
                out.append(f"generated {what} name {value} is not a DNS-1035 label of at most 63")
    return out


def _pod_problems(pod: dict[str, Any], config_maps: set[str]) -> list[str]:
    out: list[str] = []
    containers = pod["containers"]
    names = [c["name"] for c in containers]
    if len(set(names)) != len(names):
        out.append(f"container names repeat: {names}")
    out += [f"container name {n!r} is not a DNS-1123 label" for n in names if not is_dns1123_label(n)]
    ports = [p for c in containers for p in c.get("ports", [])]
    numbers = [p["containerPort"] for p in ports]
    if len(set(numbers)) != len(numbers):
        out.append(f"container ports repeat within the pod: {sorted(numbers)}")
    port_names = [p["name"] for p in ports]
    if len(set(port_names)) != len(port_names):
        out.append("port names repeat within the pod")
    out += [f"port name {n!r} is not a valid IANA service name" for n in port_names if not is_port_name(n)]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for volume in volumes.values():
        if "configMap" in volume and volume["configMap"]["name"] not in config_maps:
            out.append(f"volume {volume['name']} mounts a ConfigMap that is not created")
    for c in containers:
        env_names = [e["name"] for e in c.get("env", [])]
        if len(set(env_names)) != len(env_names):
            out.append(f"{c['name']}: env names repeat")
        out += [f"{c['name']}: env name {n!r} invalid" for n in env_names if not is_env_name(n)]
        for e in c.get("env", []):
            if ("value" in e) == ("valueFrom" in e):
                out.append(f"{c['name']}: env {e['name']} needs exactly one of value, valueFrom")
        for var in (v for arg in c.get("args", []) for v in _ARG_VAR.findall(arg)):
            if var not in env_names:
                out.append(f"{c['name']}: args use $({var}) but no env {var}")
        for mount in c.get("volumeMounts", []):
            if mount["name"] not in volumes:
                out.append(f"{c['name']}: mounts unknown volume {mount['name']}")
    return out
