"""The CRD's verdict equals the model's, for random documents: the API server (the structural
schema checked with jsonschema, then every CEL rule) accepts exactly what `decode_benchmark` /
`decode_spec` accept. This is what proves the CEL copies of the models' `__post_init__` rules
right: a rule too weak or too strong shows up as a counterexample.

Documents are drawn near the boundary (most fields optional, values either side of each limit,
canonical and custom phase names, nulls), each checked as written and after the API server's
structural defaulting. Transition rules: a random update passes exactly when it leaves every
immutable field as it was."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
from _crd_docs import BENCHMARK, schema_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiperf.config import ConfigError, decode_benchmark
from aiperf.crd.model import JOB_KIND, SWEEP_KIND, AIPerfJobSpec, decode_spec
from aiperf.crd.validation import apply_defaults, validator_for

Doc = dict[str, Any]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def nullable(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


RATE_TYPES = ["poisson", "gamma", "constant"]
PHASE_TYPES = ["concurrency", *RATE_TYPES, "fixed_schedule"]


def mostly(good: list[Any], bad: list[Any]) -> st.SearchStrategy[Any]:
    """A value from `good` four times in five, else from `bad`: most documents break at most one
    rule, which is where a wrong CEL copy shows."""
    return st.sampled_from([*good * (4 * max(1, len(bad))), *bad])


def rarely(n: int) -> st.SearchStrategy[bool]:
    """True about once in `n + 1` draws."""
    return st.sampled_from([False] * n + [True])


# What a phase's stop condition says: ok ones first.
STOPS = mostly([{"requests": 2}, {"duration": 5}, {"duration": 0.5, "grace_period": 0},
                {"duration": 2, "grace_period": None}, {"requests": 1, "duration": None}],
               [{}, {"requests": 2, "duration": 5}, {"grace_period": 1}, {"requests": 0},
                {"requests": None, "duration": None}, {"duration": 0}])


@st.composite
def phase(draw: st.DrawFn, role: str) -> Doc:
    """A phase meant for `role` (warmup or profiling), usually valid, sometimes broken once."""
    kind = draw(mostly(PHASE_TYPES, ["burst"]))
    out: Doc = {"type": kind, **draw(STOPS)}
    if kind == "fixed_schedule" and draw(st.booleans()):
        out = {"type": kind}
    wants_rate = kind in RATE_TYPES
    if draw(mostly([wants_rate], [not wants_rate])):
        out["rate"] = draw(mostly([0.5, 4], [0, None]))
    if draw(st.booleans()):
        out["concurrency"] = draw(mostly([1, 3], [0, None]))
    if draw(rarely(4)):
        out["smoothness"] = draw(mostly([2.5] if kind == "gamma" else [2.5, None], [0]))
    naming = draw(mostly(["canonical", "canonical+kind", "custom+kind", "default"],
                         ["custom", "other-kind", "bad-name", "null-kind"]))
    other = "profiling" if role == "warmup" else "warmup"
    custom = draw(st.sampled_from(["steady", "cache_prime", "Warmup", "PROFILING", "Steady"]))
    out.update({"canonical": {"name": role}, "canonical+kind": {"name": role, "kind": role},
                "custom+kind": {"name": custom, "kind": role}, "default": {"kind": None} if role == "profiling"
                else {"name": role}, "custom": {"name": custom}, "other-kind": {"name": role, "kind": other},
                "bad-name": {"name": draw(st.sampled_from(["9x", "", "a b"])), "kind": role},
                "null-kind": {"name": custom, "kind": None}}[naming])
    if draw(rarely(6)):
        out["cancellation"] = {"rate": draw(mostly([0, 50, 100], [101])), "delay": draw(mostly([0, 1], [-1]))}
    if draw(rarely(20)):
        out["bogus"] = 1
    return out


@st.composite
def phases(draw: st.DrawFn) -> list[Doc]:
    shape = draw(mostly(["profiling", "warmup+profiling"], ["profiling+warmup", "warmup", "three", "none",
                                                            "same-name"]))
    roles = {"profiling": ["profiling"], "warmup+profiling": ["warmup", "profiling"],
             "profiling+warmup": ["profiling", "warmup"], "warmup": ["warmup"],
             "three": ["warmup", "warmup", "profiling"], "none": [], "same-name": ["warmup", "profiling"]}[shape]
    out = [draw(phase(role)) for role in roles]
    if shape == "same-name":
        name = draw(st.sampled_from(["steady", "Steady", "STEADY"]))
        out[0].update(name=name, kind="warmup")
        out[1].update(name=draw(st.sampled_from(["steady", "Steady", "steady2"])), kind="profiling")
    return out


DATASET = st.one_of(
    st.fixed_dictionaries({"type": st.just("synthetic")}, optional={
        "entries": mostly([1, 3], [0]), "name": mostly(["default", "a-b"], ["1x"]),
        "prompts": st.fixed_dictionaries({}, optional={"isl": st.fixed_dictionaries({"mean": mostly([1, 64], [0])}),
                                                       "osl": nullable(st.fixed_dictionaries({"mean": st.just(8)})),
                                                       "block_size": nullable(mostly([1, 2], [0]))}),
        "turns": st.fixed_dictionaries({"mean": mostly([1, 2], [0.5])}),
        "turn_delay": st.fixed_dictionaries({}, optional={"mean": mostly([0, 3], [-1])}),
        "prefix_prompts": st.fixed_dictionaries({}, optional={"pool_size": mostly([0, 2], [-1])}),
        "random_seed": nullable(st.integers(0, 9)),
    }),
    st.fixed_dictionaries({"type": st.just("file"), "path": mostly(["trace.jsonl", "/data"], [""])}, optional={
        "format": nullable(mostly(["mooncake_trace", "single_turn"], ["csv"])),
        "entries": mostly([1, 3], [0]),
    }),
    st.fixed_dictionaries({"type": st.sampled_from(["synthetic", "file", "s3"])}, optional={
        "path": st.just("x.jsonl"), "turns": st.fixed_dictionaries({"mean": st.just(2)}),
        "format": nullable(st.just("random_pool")), "prefix_prompts": st.just({}),
        "turn_delay": st.just({}),
    }),
)

_BODIES = st.fixed_dictionaries(
    {"models": mostly([["m"], ["Qwen/Qwen3-0.6B"]], [[], ["m", "n"], [" "], [""]])},
    optional={
        "datasets": st.one_of(*[st.lists(DATASET, min_size=1, max_size=1)] * 4, st.lists(DATASET, max_size=2)),
        "phases": phases(),
        "endpoint": st.fixed_dictionaries({}, optional={
            "urls": mostly([["http://h:8000"], ["https://h/v1"]], [["ftp://h"], ["http://h:99999"], []]),
            "type": mostly(["chat", "completions"], ["rerank"]),
            "timeout": mostly([30], [0]),
            "header_names": mostly([["X-A"]], [["bad header"]]),
            "extra": st.dictionaries(st.sampled_from(["max_tokens", "nested"]), st.sampled_from([1, "x", [1], {"a": None}])),
        }),
        "slos": st.dictionaries(mostly(["time_to_first_token", "request_latency"], ["ttft"]),
                                mostly([1, 2.5], [0]), max_size=2),
        "runtime": st.fixed_dictionaries({}, optional={"workers": nullable(mostly([1, 2], [0])),
                                                       "ui": nullable(mostly(["none"], ["fancy"]))}),
        "tokenizer": st.fixed_dictionaries({}, optional={"name": nullable(mostly(["t.json"], [""]))}),
        "random_seed": nullable(st.integers(-1, 9)),
    },
)


@st.composite
def benchmarks(draw: st.DrawFn) -> Doc:
    doc: Doc = draw(_BODIES)
    if draw(rarely(20)):
        doc["bogus"] = True
    return doc


BENCHMARKS = benchmarks()

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


def model_accepts_benchmark(doc: Doc) -> bool:
    try:
        decode_benchmark(copy.deepcopy(doc))
    except ConfigError:
        return False
    return True


def model_accepts_spec(kind: str, spec: Doc) -> bool:
    try:
        decode_spec(copy.deepcopy(spec), kind)
    except msgspec.ValidationError:
        return False
    return True


SEEN: dict[str, set[bool]] = {}


@SETTINGS
@given(doc=BENCHMARKS, defaults=st.booleans())
def test_the_crd_accepts_exactly_the_benchmarks_the_model_accepts(doc: Doc, defaults: bool) -> None:
    verdict = model_accepts_benchmark(doc)
    SEEN.setdefault("benchmark", set()).add(verdict)
    assert crd_accepts(JOB_KIND, {"benchmark": doc}, defaults=defaults) == verdict, doc


def test_both_verdicts_occur() -> None:
    """The generator above is not one-sided (skipped when the property test did not run first)."""
    if "benchmark" in SEEN:
        assert SEEN["benchmark"] == {True, False}


TOLERATION = st.fixed_dictionaries({}, optional={
    "key": nullable(st.sampled_from(["dedicated", "nvidia.com/gpu", "bad key"])),
    "operator": nullable(st.sampled_from(["Equal", "Exists", "In"])),
    "value": nullable(st.sampled_from(["", "bench"])),
    "effect": nullable(st.sampled_from(["NoSchedule", "NoExecute"])),
    "tolerationSeconds": nullable(st.integers(0, 5)),
})
ENV = st.fixed_dictionaries({"name": st.sampled_from(["A", "B", "AIPERF_API_KEY", "1 x"])}, optional={
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
    "imagePullPolicy": nullable(st.sampled_from(["Always", "Sometimes"])),
})
ENVELOPE = st.fixed_dictionaries({"benchmark": st.just(BENCHMARK)}, optional={
    "podTemplate": nullable(POD_TEMPLATE),
    "workersPerPod": nullable(st.sampled_from([0, 1, 256, 257])),
    "connectionsPerWorker": nullable(st.sampled_from([0, 2])),
    "resourceMode": nullable(st.sampled_from(["burstable", "besteffort"])),
    "secrets": nullable(st.fixed_dictionaries({}, optional={"apiKey": nullable(st.fixed_dictionaries(
        {"name": st.just("s")}, optional={"key": st.sampled_from(["k", "k k"])}))})),
    "timeoutSeconds": nullable(st.sampled_from([0, 60])),
    "ttlSecondsAfterFinished": nullable(st.sampled_from([-1, 0])),
    "cancel": st.sampled_from([True, False]),
    "image": nullable(st.sampled_from(["r/a:1", "has space"])),
})
SWEEP = st.fixed_dictionaries({"parameters": st.dictionaries(
    st.sampled_from(["phases.profiling.rate", "random_seed", "Bad.Path", "a..b"]),
    st.lists(st.sampled_from([1, 2.5]), min_size=0, max_size=3), max_size=3)}, optional={
    "type": st.sampled_from(["grid", "zip", "random"]),
    "cooldownSeconds": st.sampled_from([0, -1]),
})


@SETTINGS
@given(spec=ENVELOPE, defaults=st.booleans())
def test_the_crd_accepts_exactly_the_job_envelopes_the_model_accepts(spec: Doc, defaults: bool) -> None:
    assert crd_accepts(JOB_KIND, spec, defaults=defaults) == model_accepts_spec(JOB_KIND, spec), spec


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
    "workersPerPod": st.sampled_from([1, 2]),
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
    fields = {f.encode_name for f in msgspec.structs.fields(AIPerfJobSpec)} - AIPerfJobSpec.MUTABLE
    unchanged = all((f in old) == (f in new) and old.get(f) == new.get(f) for f in fields)
    assert crd_accepts(JOB_KIND, new, defaults=False, old=old) == unchanged, (old, new)
