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
FILE_DATASET = {"type": "file", "path": "/data/trace.jsonl", "format": "mooncake_trace"}

INVALID: list[tuple[str, str, Callable[[Doc], None], str, str]] = [
    # (id, kind, change, path, message)
    ("custom-name-without-kind", JOB_KIND, _set(lambda d: phase(d, 1), name="steady"),
     "spec.benchmark.phases[1].kind", "kind: required for a custom phase name (warmup or profiling)"),
    ("reserved-name-other-kind", JOB_KIND, _set(lambda d: phase(d, 0), kind="profiling"),
     "spec.benchmark.phases[0].kind", "kind: the names warmup and profiling are reserved for phases of that kind"),
    ("default-name-is-profiling", JOB_KIND, _set(lambda d: phase(d, 0), name=_DEL, kind="warmup"),
     "spec.benchmark.phases[0].kind", "kind: the names warmup and profiling are reserved for phases of that kind"),
    ("requests-and-duration", JOB_KIND, _set(lambda d: phase(d, 1), requests=5),
     "spec.benchmark.phases[1].requests", "requests: choose one stop condition, requests or duration"),
    ("grace-without-duration", JOB_KIND, _set(lambda d: phase(d, 0), grace_period=1),
     "spec.benchmark.phases[0].grace_period", "grace_period: needs duration"),
    ("no-stop-condition", JOB_KIND, _set(lambda d: phase(d, 1), duration=_DEL, grace_period=_DEL),
     "spec.benchmark.phases[1].requests", "requests: required (or duration)"),
    ("null-stop-condition", JOB_KIND, _set(lambda d: phase(d, 1), duration=None, grace_period=None),
     "spec.benchmark.phases[1].requests", "requests: required (or duration)"),
    ("profiling-then-warmup", JOB_KIND, lambda d: bench(d)["phases"].reverse(),
     "spec.benchmark.phases", "phases: an optional warmup phase, then one profiling phase"),
    ("warmup-only", JOB_KIND, lambda d: bench(d)["phases"].pop(),
     "spec.benchmark.phases", "phases: an optional warmup phase, then one profiling phase"),
    ("names-differ-only-in-case", JOB_KIND,
     lambda d: (phase(d, 0).update(name="Steady", kind="warmup"), phase(d, 1).update(name="steady", kind="profiling")),
     "spec.benchmark.phases", "phases: names must be distinct"),
    ("fixed-schedule-on-synthetic", JOB_KIND,
     _set(lambda d: phase(d, 1), type="fixed_schedule", rate=_DEL, concurrency=_DEL),
     "spec.benchmark.phases", "phases: fixed_schedule needs a file dataset with timestamps"),
    ("poisson-without-rate", JOB_KIND, _set(lambda d: phase(d, 1), rate=_DEL),
     "spec.benchmark.phases[1].rate", "rate: required for type poisson, gamma, constant"),
    ("rate-on-concurrency", JOB_KIND, _set(lambda d: phase(d, 0), rate=3.0),
     "spec.benchmark.phases[0].rate", "rate: only for type poisson, gamma, constant"),
    ("smoothness-on-poisson", JOB_KIND, _set(lambda d: phase(d, 1), smoothness=2),
     "spec.benchmark.phases[1].smoothness", "smoothness: only for type gamma"),
    ("null-concurrency-closed-loop", JOB_KIND, _set(lambda d: phase(d, 0), concurrency=None),
     "spec.benchmark.phases[0].concurrency", "concurrency: must not be null for type concurrency"),
    ("file-without-path", JOB_KIND, _set(lambda d: bench(d)["datasets"][0], type="file", prompts=_DEL),
     "spec.benchmark.datasets[0].path", "path: required for type file"),
    ("path-on-synthetic", JOB_KIND, _set(lambda d: bench(d)["datasets"][0], path="/x.jsonl"),
     "spec.benchmark.datasets[0].path", "path: only for type file"),
    ("format-on-synthetic", JOB_KIND, _set(lambda d: bench(d)["datasets"][0], format="single_turn"),
     "spec.benchmark.datasets[0].format", "format: only for type file"),
    ("turns-on-file", JOB_KIND, lambda d: bench(d)["datasets"].__setitem__(0, {**FILE_DATASET, "turns": {"mean": 2}}),
     "spec.benchmark.datasets[0].turns", "turns: only for type synthetic"),
    ("turn-delay-on-file", JOB_KIND,
     lambda d: bench(d)["datasets"].__setitem__(0, {**FILE_DATASET, "turn_delay": {"mean": 2}}),
     "spec.benchmark.datasets[0].turn_delay", "turn_delay: only for type synthetic"),
    ("prefix-prompts-on-file", JOB_KIND,
     lambda d: bench(d)["datasets"].__setitem__(0, {**FILE_DATASET, "prefix_prompts": {"pool_size": 2}}),
     "spec.benchmark.datasets[0].prefix_prompts", "prefix_prompts: only for type synthetic"),
    ("unknown-slo", JOB_KIND, _set(bench, slos={"ttft": 1}), "spec.benchmark.slos", "keys must be one of:"),
    ("env-value-and-value-from", JOB_KIND,
     lambda d: pod(d)["env"][0].update(valueFrom={"secretKeyRef": {"name": "s", "key": "k"}}),
     "spec.podTemplate.env[0].value", "give exactly one of value and valueFrom"),
    ("env-neither", JOB_KIND, lambda d: pod(d)["env"][0].pop("value"),
     "spec.podTemplate.env[0].value", "give exactly one of value and valueFrom"),
    ("api-key-as-plain-env", JOB_KIND, lambda d: pod(d)["env"].append({"name": "AIPERF_API_KEY", "value": "sk-x"}),
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
    ("zip-uneven", SWEEP_KIND,
     lambda d: d["spec"]["sweep"].update(type="zip", parameters={"phases.profiling.rate": [1, 2],
                                                                 "phases.warmup.concurrency": [1]}),
     "spec.sweep.parameters", "parameters: a zip sweep needs the same number of values"),
    ("sweep-path", SWEEP_KIND, lambda d: d["spec"]["sweep"]["parameters"].update({"Phases..rate": [1]}),
     "spec.sweep.parameters", "keys must match"),
    ("sweep-path-length", SWEEP_KIND, lambda d: d["spec"]["sweep"]["parameters"].update({"a" * 257: [1]}),
     "spec.sweep.parameters", "keys must have at most 256 characters"),
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
    ("custom-names-with-kind", lambda d: (phase(d, 0).update(name="cache_prime", kind="warmup"),
                                          phase(d, 1).update(name="steady", kind="profiling"))),
    ("kind-equal-to-name", _set(lambda d: phase(d, 1), kind="profiling")),
    ("nulls-where-nullable", _set(lambda d: phase(d, 1), kind=None, requests=None)),
    ("null-concurrency-open-loop", _set(lambda d: phase(d, 1), concurrency=None)),
    ("one-profiling-phase-by-default-name", lambda d: bench(d)["phases"].__setitem__(
        slice(None), [{"type": "concurrency", "requests": 10}])),
    ("no-phases-at-all", lambda d: bench(d).pop("phases")),
    ("fixed-schedule-on-file", lambda d: (bench(d)["datasets"].__setitem__(0, dict(FILE_DATASET)),
                                          bench(d)["phases"].__setitem__(slice(None), [{"type": "fixed_schedule"}]))),
    ("gamma-smoothness", _set(lambda d: phase(d, 1), type="gamma", smoothness=4)),
    ("minimal-spec", lambda d: d.__setitem__("spec", {"benchmark": {"models": ["m"]}})),
    ("toleration-exists-without-key", lambda d: pod(d)["tolerations"].append({"operator": "Exists"})),
    ("env-secret-by-reference", lambda d: pod(d)["env"].append(
        {"name": "AIPERF_API_KEY", "valueFrom": {"secretKeyRef": {"name": "llm", "key": "k"}}})),
    ("free-form-extra", _set(lambda d: bench(d)["endpoint"], extra={"anything": {"goes": [1, "x", None]}})),
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


def test_a_sweep_needs_its_sweep_and_a_job_has_none() -> None:
    doc = sweep()
    del doc["spec"]["sweep"]
    assert Problem("spec", "'sweep': required") in problems(doc)
    doc = job(sweep={"parameters": {"a": [1]}})
    assert any("unknown field(s) 'sweep'" in p.message for p in problems(doc))


# -- transition rules ----------------------------------------------------------------------------

JOB_IMMUTABLE = sorted(set(schema_of(JOB_KIND)["properties"]["spec"]["properties"]) - {"cancel", "timeoutSeconds"})
SWEEP_IMMUTABLE = sorted(set(schema_of(SWEEP_KIND)["properties"]["spec"]["properties"])
                         - {"cancel", "ttlSecondsAfterFinished"})
CHANGED: dict[str, Any] = {
    "benchmark": {"models": ["other"]}, "image": "registry.example.com/aiperf/all:0.2.0",
    "resourceMode": "burstable", "connectionsPerWorker": 8, "workersPerPod": 5, "recordProcessorsPerPod": 2,
    "podTemplate": {"labels": {"team": "other"}}, "secrets": {"headers": {"name": "h", "key": "json"}},
    "logLevel": "debug", "ttlSecondsAfterFinished": 60, "timeoutSeconds": 60,
    "sweep": {"type": "zip", "parameters": {"phases.profiling.rate": [1]}}, "multiRun": {"numRuns": 2},
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
    new["spec"]["benchmark"]["phases"][1]["duration"] = 60.0  # was 60
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
