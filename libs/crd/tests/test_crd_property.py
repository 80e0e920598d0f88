"""The CRD's verdict equals the model's, for random envelopes: the API server (the structural
schema checked with jsonschema, then every CEL rule) accepts exactly what the envelope models
accept (`spec.benchmark` is kept as written by the CRD and read by `decode_spec` with the config
reader: those checks are the reader's tests', and `validate_resource` runs them too). This is what proves the CEL copies of the envelope models'
`__post_init__` rules right: a rule too weak or too strong shows up as a counterexample.

Documents are drawn near the boundary (most fields optional, values either side of each limit,
nulls), each checked as written and after the API server's structural defaulting. Transition
rules: a random update passes exactly when it leaves every immutable field as it was."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
from _crd_docs import BENCHMARK, schema_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiperf.crd.model import JOB_KIND, SWEEP_KIND, JobSpecSchema, SweepSpecSchema
from aiperf.crd.validation import apply_defaults, validator_for

Doc = dict[str, Any]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def nullable(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


JOB_SCHEMA = schema_of(JOB_KIND)
# Built now, not inside a Hypothesis example: cel-python's Environment raises the recursion limit,
# which Hypothesis reports when it happens during a test.
VALIDATORS = (validator_for(JOB_KIND), validator_for(SWEEP_KIND))


def crd_accepts(kind: str, spec: Doc, *, defaults: bool, old: Doc | None = None) -> bool:
    cr = {"apiVersion": "aiperf.nvidia.com/v1alpha1", "kind": kind, "metadata": {"name": "x"}, "spec": spec}
    schema = JOB_SCHEMA if kind == JOB_KIND else schema_of(SWEEP_KIND)
    if defaults:
        cr = apply_defaults(cr, schema)
    old_cr = None if old is None else {**cr, "spec": old}
    if defaults and old_cr is not None:
        old_cr = apply_defaults(old_cr, schema)
    return validator_for(kind).problems(cr, old_cr) == []


SEEN: dict[str, set[bool]] = {}


def model_accepts_spec(kind: str, spec: Doc) -> bool:
    """The envelope models' verdict (what the CEL rules copy); what the sweep's paths and the
    benchmark mean is the config reader's to check (`decode_spec` does both)."""
    try:
        msgspec.convert(copy.deepcopy(spec), JobSpecSchema if kind == JOB_KIND else SweepSpecSchema)
    except msgspec.ValidationError:
        verdict = False
    else:
        verdict = True
    SEEN.setdefault(kind, set()).add(verdict)
    return verdict


TOLERATION = st.fixed_dictionaries({}, optional={
    "key": nullable(st.sampled_from(["dedicated", "nvidia.com/gpu", "bad key"])),
    "operator": nullable(st.sampled_from(["Equal", "Exists", "In"])),
    "value": nullable(st.sampled_from(["", "bench"])),
    "effect": nullable(st.sampled_from(["NoSchedule", "NoExecute"])),
    "tolerationSeconds": nullable(st.integers(0, 5)),
})
ENV = st.fixed_dictionaries({"name": st.sampled_from(["A", "B", "AIPERF_API_KEY", "OPENAI_API_KEY", "1 x"])},
                            optional={
    "value": nullable(st.sampled_from(["", "v"])),
    "valueFrom": nullable(st.fixed_dictionaries({"secretKeyRef": st.fixed_dictionaries(
        {"name": st.sampled_from(["s", "S!"]), "key": st.just("k")})})),
})
POD_TEMPLATE = st.fixed_dictionaries({}, optional={
    "tolerations": st.lists(TOLERATION, max_size=2),
    "env": st.lists(ENV, max_size=3),
    "labels": st.dictionaries(st.sampled_from(["team", "app.kubernetes.io/name", "x/y/z"]),
                              st.sampled_from(["perf", "-bad"]), max_size=2),
    "nodeSelector": st.dictionaries(st.sampled_from(["pool", "bad key"]), st.just("a"), max_size=1),
    "imagePullSecrets": st.lists(st.fixed_dictionaries({"name": st.sampled_from(["regcred", "Reg"])}), max_size=1),
    "resources": st.dictionaries(st.sampled_from(["worker", "api", "gpu"]), st.fixed_dictionaries({}, optional={
        "limits": st.dictionaries(st.sampled_from(["cpu", "memory"]), st.sampled_from(["1", "500m", "lots"]),
                                  max_size=1)}), max_size=2),
    "volumes": st.lists(st.sampled_from([{"name": "cache", "emptyDir": {}}, {"emptyDir": {}}]), max_size=2),
    "volumeMounts": st.lists(st.sampled_from([{"name": "cache", "mountPath": "/c"}, {"name": "cache"},
                                              {"name": "other", "mountPath": "/o"}]), max_size=1),
    "containerSecurityContext": st.sampled_from([{}, {"readOnlyRootFilesystem": True}, {"privileged": True},
                                                 {"allowPrivilegeEscalation": True}, {"privileged": False}]),
    "podSecurityContext": st.sampled_from([{}, {"runAsNonRoot": True}, {"runAsUser": 0}, {"runAsUser": 1000},
                                           {"runAsNonRoot": False}]),
    "initContainers": st.lists(st.sampled_from([{"name": "i", "image": "busybox"}, {"name": "i"},
                                                {"name": "i", "image": "b", "securityContext": {"privileged": True}}]),
                               max_size=1),
    "extraPodSpec": st.sampled_from([{}, {"hostname": "x"}, {"hostNetwork": True}, {"containers": []}]),
})
ENVELOPE = st.fixed_dictionaries({"benchmark": st.just(BENCHMARK)}, optional={
    "podTemplate": nullable(POD_TEMPLATE),
    "imagePullPolicy": nullable(st.sampled_from(["Always", "Sometimes"])),
    "connectionsPerWorker": nullable(st.sampled_from([0, 2])),
    "resourceMode": nullable(st.sampled_from(["burstable", "none", "besteffort"])),
    "timeoutSeconds": nullable(st.sampled_from([0, 60, -1])),
    "ttlSecondsAfterFinished": nullable(st.sampled_from([-1, 0])),
    "keepFailedPods": st.booleans(),
    "cancel": st.sampled_from([True, False]),
    "image": nullable(st.sampled_from(["r/a:1", "has space"])),
    "multiRun": nullable(st.fixed_dictionaries({}, optional={"numRuns": st.sampled_from([1, 2]),
                                                             "minRuns": st.sampled_from([1, 2])})),
    "schemaVersion": nullable(st.sampled_from(["2.0", "3.0"])),
})
SWEEP = st.fixed_dictionaries({"parameters": st.dictionaries(
    st.sampled_from(["phases.profiling.rate", "rate", "phases.warmup.concurrency"]),
    st.lists(st.sampled_from([1, 2.5]), min_size=1, max_size=3), max_size=2)}, optional={
    "type": st.sampled_from(["grid", "zip", "scenarios", "random"]),
    "runs": st.lists(st.fixed_dictionaries({"name": st.sampled_from(["a", "b", "a b"])}), max_size=2),
    "cooldownSeconds": st.sampled_from([0, -1]),
})


@SETTINGS
@given(spec=ENVELOPE, defaults=st.booleans())
def test_the_crd_accepts_exactly_the_job_envelopes_the_model_accepts(spec: Doc, defaults: bool) -> None:
    assert crd_accepts(JOB_KIND, spec, defaults=defaults) == model_accepts_spec(JOB_KIND, spec), spec


def test_both_verdicts_occur() -> None:
    """The generators above are not one-sided (skipped when the property tests did not run first)."""
    for verdicts in SEEN.values():
        assert verdicts == {True, False}


@SETTINGS
@given(sweep=SWEEP, multi=nullable(st.fixed_dictionaries({}, optional={"numRuns": st.sampled_from([0, 3, 101])})),
       defaults=st.booleans())
def test_the_crd_accepts_exactly_the_sweeps_the_model_accepts(sweep: Doc, multi: Doc | None, defaults: bool) -> None:
    spec = {"benchmark": BENCHMARK, "sweep": sweep}
    if multi is not None:
        spec["multiRun"] = multi
    assert crd_accepts(SWEEP_KIND, spec, defaults=defaults) == model_accepts_spec(SWEEP_KIND, spec), spec


UPDATES = st.fixed_dictionaries({}, optional={
    "benchmark": st.sampled_from([{"models": ["m"]}, {"models": ["n"]}, BENCHMARK]),
    "image": st.sampled_from(["r/a:1", "r/a:2"]),
    "imagePullPolicy": st.sampled_from(["Always", "Never"]),
    "podTemplate": st.sampled_from([{}, {"labels": {"a": "b"}}]),
    "cancel": st.booleans(),
    "timeoutSeconds": st.sampled_from([60, 120]),
    "ttlSecondsAfterFinished": st.sampled_from([0, 5]),
})


@SETTINGS
@given(old=UPDATES, new=UPDATES)
def test_an_update_passes_exactly_when_every_immutable_field_is_unchanged(old: Doc, new: Doc) -> None:
    old = {"benchmark": {"models": ["m"]}, **old}
    new = {"benchmark": {"models": ["m"]}, **new}
    fields = {f.encode_name for f in msgspec.structs.fields(JobSpecSchema)} - JobSpecSchema.MUTABLE
    unchanged = all((f in old) == (f in new) and old.get(f) == new.get(f) for f in fields)
    assert crd_accepts(JOB_KIND, new, defaults=False, old=old) == unchanged, (old, new)
