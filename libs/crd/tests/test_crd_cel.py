"""Every CEL rule of both CRDs, compiled with cel-python and evaluated on valid and invalid
objects, and the transition rules on old/new pairs. A last test checks that the cases below make
every rule of both CRDs fail at least once (a rule nothing can violate is a rule nobody tested)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from _crd_docs import job, schema_of, sweep

from aiperf.crd.model import JOB_KIND, SWEEP_KIND
from aiperf.crd.validation import Problem, SchemaValidator, validate_resource, validator_for

Doc = dict[str, Any]
HIT: set[tuple[str, str]] = set()
"""(kind, message) of every rule a case below made fail."""


def problems(doc: Doc, old: Doc | None = None) -> list[Problem]:
    found = validator_for(doc["kind"]).problems(doc, old)
    HIT.update((doc["kind"], p.message) for p in found)
    return found


def bench(doc: Doc) -> Doc:
    return doc["spec"]["benchmark"]


def phase(doc: Doc, i: int) -> Doc:
    return doc["spec"]["benchmark"]["phases"][i]


def pod(doc: Doc) -> Doc:
    return doc["spec"]["podTemplate"]


def _set(getter: Callable[[Doc], Any], **values: Any) -> Callable[[Doc], None]:
    def change(doc: Doc) -> None:
        target = getter(doc)
        for key, value in values.items():
            if value is _DEL:
                target.pop(key, None)
            else:
                target[key] = value
    return change


_DEL = object()

INVALID: list[tuple[str, str, Callable[[Doc], None], str, str]] = [
    # (id, kind, change, path, message)
    ("env-value-and-value-from", JOB_KIND,
     lambda d: pod(d)["env"][0].update(valueFrom={"secretKeyRef": {"name": "s", "key": "k"}}),
     "spec.podTemplate.env[0].value", "give exactly one of value and valueFrom"),
    ("env-neither", JOB_KIND, lambda d: pod(d)["env"][0].pop("value"),
     "spec.podTemplate.env[0].value", "give exactly one of value and valueFrom"),
    ("api-key-as-plain-env", JOB_KIND, lambda d: pod(d)["env"].append({"name": "AIPERF_API_KEY", "value": "sk-x"}),
     "spec.podTemplate.env[3].value", "a secret never goes in a CR as a plain value"),
    ("injected-api-key-as-plain-env", JOB_KIND,
     lambda d: pod(d)["env"].__setitem__(2, {"name": "OPENAI_API_KEY", "value": "sk-x"}),
     "spec.podTemplate.env[2].value", "a secret never goes in a CR as a plain value"),
    ("env-name-twice", JOB_KIND, lambda d: pod(d)["env"].append({"name": "HF_TOKEN", "value": "x"}),
     "spec.podTemplate.env", "env: each name once"),
    ("reserved-label", JOB_KIND, lambda d: pod(d)["labels"].update({"app.kubernetes.io/instance": "x"}),
     "spec.podTemplate.labels", "labels: app.kubernetes.io/name, instance and component are set by aiperf"),
    ("exists-with-value", JOB_KIND, lambda d: pod(d)["tolerations"][1].update(value="x"),
     "spec.podTemplate.tolerations[1].value", "operator Exists takes no value"),
    ("no-key-equal", JOB_KIND, lambda d: pod(d)["tolerations"][1].update(operator="Equal"),
     "spec.podTemplate.tolerations[1].operator", "a toleration without a key needs operator Exists"),
    ("toleration-seconds-no-execute-only", JOB_KIND, lambda d: pod(d)["tolerations"][1].update(effect="NoSchedule"),
     "spec.podTemplate.tolerations[1].tolerationSeconds", "tolerationSeconds needs effect NoExecute"),
    ("node-selector-key", JOB_KIND, lambda d: pod(d)["nodeSelector"].update({"bad key!": "x"}),
     "spec.podTemplate.nodeSelector", "keys must match"),
    ("empty-label-key", JOB_KIND, lambda d: pod(d)["labels"].update({"": "x"}),
     "spec.podTemplate.labels", "keys must have at least 1 characters"),
    ("long-annotation-key", JOB_KIND, lambda d: pod(d)["annotations"].update({"a" * 317: "x"}),
     "spec.podTemplate.annotations", "keys must have at most 316 characters"),
    ("resources-of-unknown-service", JOB_KIND, lambda d: pod(d)["resources"].update({"gpu-thing": {}}),
     "spec.podTemplate.resources", "keys must be one of: api, dataset-manager"),
    ("resource-name", JOB_KIND, lambda d: pod(d)["resources"]["worker"]["limits"].update({"cpu!": "1"}),
     "spec.podTemplate.resources.worker.limits", "keys must match"),
    ("volume-name-twice", JOB_KIND, lambda d: pod(d)["volumes"].append({"name": "model-cache", "emptyDir": {}}),
     "spec.podTemplate.volumes", "volumes: each needs a name, each name once"),
    ("mount-of-no-volume", JOB_KIND, lambda d: pod(d)["volumeMounts"].append({"name": "nope", "mountPath": "/x"}),
     "spec.podTemplate.volumeMounts", "volumeMounts: each needs a name and mountPath"),
    ("privileged-container", JOB_KIND, lambda d: pod(d)["containerSecurityContext"].update(privileged=True),
     "spec.podTemplate.containerSecurityContext", "containerSecurityContext: privileged"),
    ("escalating-init-container", JOB_KIND,
     lambda d: pod(d)["initContainers"][0].update(securityContext={"allowPrivilegeEscalation": True}),
     "spec.podTemplate.initContainers", "initContainers: each needs a name and an image"),
    ("root-pod", JOB_KIND, lambda d: pod(d)["podSecurityContext"].update(runAsNonRoot=False),
     "spec.podTemplate.podSecurityContext", "podSecurityContext: running as root"),
    ("extra-pod-spec-reserved", JOB_KIND, lambda d: pod(d).update(extraPodSpec={"hostNetwork": True}),
     "spec.podTemplate.extraPodSpec", "extraPodSpec: containers, restartPolicy"),
    ("repeated-runs-in-a-job", JOB_KIND, lambda d: d["spec"].update(multiRun={"numRuns": 3}),
     "spec.multiRun", "multiRun: an AIPerfJob is one run"),
    ("min-runs-of-a-job", JOB_KIND, lambda d: d["spec"].update(multiRun={"minRuns": 2}),
     "spec.multiRun.minRuns", "minRuns: at most numRuns"),
    ("zip-uneven", SWEEP_KIND,
     lambda d: d["spec"]["sweep"].update(type="zip", parameters={"phases.profiling.rate": [1, 2],
                                                                 "phases.warmup.concurrency": [1]}),
     "spec.sweep.parameters", "parameters: a zip sweep needs the same number of values"),
    ("scenarios-with-parameters", SWEEP_KIND, lambda d: d["spec"]["sweep"].update(type="scenarios"),
     "spec.sweep.parameters", "parameters: a grid or zip sweep needs parameters, a scenarios sweep runs"),
    ("min-runs-above-num-runs", SWEEP_KIND, lambda d: d["spec"].update(multiRun={"numRuns": 2, "minRuns": 3}),
     "spec.multiRun.minRuns", "minRuns: at most numRuns"),
]


@pytest.mark.parametrize(("kind", "change", "path", "message"), [c[1:] for c in INVALID],
                         ids=[c[0] for c in INVALID])
def test_an_invalid_object_fails_its_rule_at_its_path(kind: str, change: Callable[[Doc], None], path: str,
                                                      message: str) -> None:
    doc = job() if kind == JOB_KIND else sweep()
    assert problems(doc) == []
    change(doc)
    found = problems(doc)
    assert any(p.path == path and p.message.startswith(message) for p in found), found
    assert validate_resource(doc) != []


VALID: list[tuple[str, Callable[[Doc], None]]] = [
    ("as-given", lambda d: None),
    ("minimal-spec", lambda d: d.__setitem__("spec", {"benchmark": {"models": ["m"]}})),
    ("aiperf-shapes", lambda d: d["spec"].__setitem__("benchmark", {
        "model": "m", "endpoint": {"url": "http://h:8000/v1/chat/completions", "apiKey": "<redacted>"},
        "dataset": {"type": "synthetic", "isl": 128, "osl": {"mean": 64, "median": 60}},
        "warmup": {"type": "concurrency", "requests": 4, "excludeFromResults": True},
        "profiling": {"type": "poisson", "rate": "{{ rate }}", "requests": 100, "duration": "2m"},
        "runtime": {"workersPerPod": 4}, "gpuTelemetry": {"enabled": True}, "otel": {}})
        or d["spec"].__setitem__("variables", {"rate": 8})),
    ("phases-as-one-mapping", lambda d: bench(d).__setitem__("phases", {"type": "concurrency", "requests": 5})),
    ("toleration-exists-without-key", lambda d: pod(d)["tolerations"].append({"operator": "Exists"})),
    ("env-secret-by-reference", lambda d: pod(d)["env"].append(
        {"name": "AIPERF_INJECTED_HEADERS", "valueFrom": {"secretKeyRef": {"name": "llm", "key": "h"}}})),
    ("free-form-extra", _set(lambda d: bench(d)["endpoint"], extra={"anything": {"goes": [1, "x", None]}})),
    ("resource-mode-none-no-timeout", lambda d: d["spec"].update(resourceMode="none", timeoutSeconds=0,
                                                                 keepFailedPods=True)),
]


@pytest.mark.parametrize("change", [c[1] for c in VALID], ids=[c[0] for c in VALID])
def test_a_valid_job_passes_every_rule(change: Callable[[Doc], None]) -> None:
    doc = job()
    change(doc)
    assert problems(doc) == []
    assert validate_resource(doc) == []


def test_a_valid_sweep_passes_every_rule() -> None:
    doc = sweep()
    assert problems(doc) == []
    doc["spec"]["sweep"].update(type="zip", parameters={"phases.profiling.rate": [1, 2], "random_seed": [1, 2]})
    assert validate_resource(doc) == []
    doc["spec"]["sweep"] = {"type": "scenarios", "runs": [
        {"name": "chat", "benchmark": {"phases": [{"name": "profiling", "rate": 2.0}]}},
        {"name": "rag", "benchmark": {"dataset": {"prompts": {"isl": {"mean": 1024, "median": 900}}}}}]}
    assert validate_resource(doc) == []


BENCHMARK_MISTAKES = [
    # (change, path, message): the CRD keeps spec.benchmark as written; the model reads it
    (lambda b: b.update(phases={"type": "concurrency"}), "spec.benchmark.phases[0].requests",
     "required (or duration, or sessions)"),
    (lambda b: b["phases"][1].update(seamless=True), "spec.benchmark.phases[1].seamless",
     "not supported (seamless phase transitions (no drain between phases) are not built)"),
    (lambda b: b["phases"][1].update(concurrency=2, prefillConcurrency=4), "spec.benchmark.phases[1].prefill_concurrency",
     "at most concurrency (2), got 4"),
    (lambda b: b.update(gpuTelemetry={"mode": "realtime_dashboard"}), "spec.benchmark.gpu_telemetry.mode",
     "not supported (the realtime GPU telemetry dashboard is not built)"),
    (lambda b: b["endpoint"].update(apiKey="sk-live"), "spec.benchmark.endpoint.apiKey",
     "a secret never goes in a CR as a plain value"),
    (lambda b: b["phases"][0].update(name="steady"), "spec.benchmark.phases[0].kind",
     "required for the custom phase name 'steady'"),
    (lambda b: b.update(modle="m"), "spec.benchmark", "unknown field 'modle'"),
    (lambda b: b.update(datasets=[{"type": "file", "path": "/traces/t.jsonl", "format": "single_turn"}]),
     "spec.benchmark.datasets[0].path", "/traces/t.jsonl: not on a volume the pods mount"),
]


@pytest.mark.parametrize(("change", "path", "message"), BENCHMARK_MISTAKES)
def test_a_benchmark_the_model_cannot_read_is_one_problem_naming_its_field(
        change: Callable[[Doc], None], path: str, message: str) -> None:
    doc = job()
    change(bench(doc))
    assert problems(doc) == []  # the API server stores it; the operator refuses it, as here
    found = validate_resource(doc)
    assert len(found) == 1 and found[0].path == path and message in found[0].message, found


def test_a_sweep_needs_its_sweep_and_a_job_has_none() -> None:
    doc = sweep()
    del doc["spec"]["sweep"]
    assert Problem("spec", "'sweep': required") in problems(doc)
    doc = job(sweep={"parameters": {"a": [1]}})
    assert any("unknown field(s) 'sweep'" in p.message for p in problems(doc))
    assert validate_resource(doc) == [  # what AIPerf's `kube init` makes of a sweep template: named as such
        Problem("spec.sweep", "an AIPerfJob is one run; a sweep is an AIPerfSweep (kind: AIPerfSweep)")]


@pytest.mark.parametrize(("field", "value", "message"), [
    ("scheduling", {"queueName": "team-a"}, "spec.scheduling: not supported (Kueue queues and priorities"),
    ("resultsTtlDays", 7, "spec.resultsTtlDays: not supported"),
    ("plot", {"visualization": {}}, "spec.plot: not supported"),
    ("failurePolicy", {"onChildFailure": "abort"}, "spec.failurePolicy: only an AIPerfSweep's runs follow"),
])
def test_aiperfs_envelope_fields_we_do_not_build_are_named(field: str, value: Any, message: str) -> None:
    assert validate_resource(job(**{field: {} if isinstance(value, dict) else None})) == []
    found = validate_resource(job(**{field: value}))
    assert [str(p) for p in found] == [next(str(p) for p in found)] and str(found[0]).startswith(message), found


def test_a_sweep_type_we_do_not_build_is_named() -> None:
    doc = sweep()
    doc["spec"]["sweep"] = {"type": "grid", "parameters": {"variables.rate": [1, 2]}}
    assert [str(p) for p in validate_resource(doc)] == [
        "spec.sweep.parameters.variables.rate: not supported (sweeping a variable; sweep the field it sets)"]


# -- transition rules ----------------------------------------------------------------------------

JOB_IMMUTABLE = sorted(set(schema_of(JOB_KIND)["properties"]["spec"]["properties"]) - {"cancel", "timeoutSeconds"})
SWEEP_IMMUTABLE = sorted(set(schema_of(SWEEP_KIND)["properties"]["spec"]["properties"])
                         - {"cancel", "ttlSecondsAfterFinished"})
CHANGED: dict[str, Any] = {
    "benchmark": {"models": ["other"]}, "image": "registry.example.com/aiperf/all:0.2.0",
    "imagePullPolicy": "Always", "resourceMode": "burstable", "connectionsPerWorker": 8,
    "podTemplate": {"labels": {"team": "other"}}, "ttlSecondsAfterFinished": 60, "timeoutSeconds": 60,
    "keepFailedPods": True, "schemaVersion": "2.0", "variables": {"a": 1}, "randomSeed": 7,
    "skipEndpointCheck": True, "noSweepTable": True,
    "sweep": {"type": "zip", "parameters": {"phases.profiling.rate": [1]}}, "multiRun": {"cooldownSeconds": 9},
    "failurePolicy": {"onChildFailure": "abort"}, "childMetadata": {"labels": {"team": "x"}},
    "scheduling": {"queueName": "q"}, "resultsTtlDays": 3, "plot": {"x": 1},
}


def _update(doc: Doc, field: str, value: Any) -> Doc:
    new = copy.deepcopy(doc)
    if value is _DEL:
        new["spec"].pop(field, None)
    else:
        new["spec"][field] = value
    return new


@pytest.mark.parametrize(("kind", "field"), [(JOB_KIND, f) for f in JOB_IMMUTABLE]
                         + [(SWEEP_KIND, f) for f in SWEEP_IMMUTABLE])
def test_an_immutable_field_can_be_neither_changed_nor_added_nor_removed(kind: str, field: str) -> None:
    base = job() if kind == JOB_KIND else sweep()
    absent, present_ = _update(base, field, _DEL), _update(base, field, CHANGED[field])
    pairs = [("added", absent, present_), ("removed", present_, absent)]
    if field in base["spec"]:
        assert base["spec"][field] != CHANGED[field]
        pairs.append(("changed", base, present_))
    for what, before, after in pairs:
        found = [p for p in problems(after, before) if p.message != f"'{field}': required"]  # benchmark, sweep
        assert [p.path for p in found] == [f"spec.{field}"], (what, found)
        assert found[0].message.startswith(f"{field}: immutable after creation"), (what, found)


@pytest.mark.parametrize(("kind", "field", "value"), [
    (JOB_KIND, "cancel", True), (JOB_KIND, "timeoutSeconds", 60), (JOB_KIND, "timeoutSeconds", _DEL),
    (SWEEP_KIND, "cancel", True), (SWEEP_KIND, "ttlSecondsAfterFinished", 5),
    (SWEEP_KIND, "ttlSecondsAfterFinished", _DEL),
])
def test_the_mutable_fields_may_change(kind: str, field: str, value: Any) -> None:
    old = job() if kind == JOB_KIND else sweep()
    assert problems(_update(old, field, value), old) == []
    assert problems(old, _update(old, field, value)) == []


def test_an_unchanged_update_and_a_create_pass_and_status_is_not_frozen() -> None:
    old = job()
    assert problems(copy.deepcopy(old), old) == []
    new = copy.deepcopy(old)
    new["status"] = {"phase": "Running", "subPhase": "profiling", "workers": {"ready": 3, "total": 10}}
    assert problems(new, old) == []


def test_a_deep_change_inside_the_benchmark_is_caught() -> None:
    old = job()
    new = copy.deepcopy(old)
    new["spec"]["benchmark"]["endpoint"]["extra"]["top_k"]["nested"].append(2)
    assert [p.message for p in problems(new, old)] == [
        "benchmark: immutable after creation (only cancel and timeoutSeconds may change)"]


def test_integer_and_float_spellings_of_a_number_are_the_same_value() -> None:
    old = job()
    new = copy.deepcopy(old)
    new["spec"]["timeoutSeconds"] = 3600.0  # a number field: 3600 and 3600.0 are one value
    assert problems(new, old) == []


def test_status_conditions_are_a_map_by_type() -> None:
    doc = job()
    doc["status"] = {"conditions": [{"type": "WorkersReady", "status": "True"},
                                    {"type": "WorkersReady", "status": "False"}]}
    assert Problem("status.conditions", "duplicate entries for key(s) type") in problems(doc)


def test_the_validator_refuses_a_rule_that_does_not_compile() -> None:
    broken = {"type": "object", "properties": {"a": {"type": "string"}},
              "x-kubernetes-validations": [{"rule": "self.a ==", "message": "m"}]}
    with pytest.raises(ValueError, match="does not compile"):
        SchemaValidator(broken)


def _hits() -> set[tuple[str, str]]:
    """(kind, message) of every rule that some invalid case or immutable-field update violates
    (computed here, so the check does not depend on which tests ran before it)."""
    for _, kind, change, _, _ in INVALID:
        doc = job() if kind == JOB_KIND else sweep()
        change(doc)
        problems(doc)
    for kind, fields in ((JOB_KIND, JOB_IMMUTABLE), (SWEEP_KIND, SWEEP_IMMUTABLE)):
        base = job() if kind == JOB_KIND else sweep()
        for field in fields:
            problems(_update(base, field, CHANGED[field]), _update(base, field, _DEL))
    return HIT


def test_every_rule_was_made_to_fail_by_some_case() -> None:
    """The cases above violate every rule of both CRDs (rules shared with AIPerfJob are covered
    through it)."""
    hits = _hits()
    for kind in (JOB_KIND, SWEEP_KIND):
        messages = {entry["message"] for entry, _ in validator_for(kind).rules()}
        seen = {m for k, m in hits if k == kind}
        missed = sorted(m for m in messages if not any(s.startswith(m) or m.startswith(s) for s in seen))
        if kind == SWEEP_KIND:
            shared = {entry["message"] for entry, _ in validator_for(JOB_KIND).rules()}
            missed = [m for m in missed if m not in shared and "only cancel and timeoutSeconds" not in m]
        assert missed == [], f"{kind}: no case violates {missed}"
