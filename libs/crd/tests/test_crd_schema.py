"""The generated CRDs are structural, carry the fields, rules and printer columns operator mode
relies on, and the generator refuses what it cannot express."""

from __future__ import annotations

import copy
import inspect
from typing import Any

import jsonschema
import msgspec
import pytest
from _crd_docs import schema_of, walk

from aiperf.crd import model as crd_model
from aiperf.crd.generator import (
    ENVELOPE_MODELS,
    GeneratorError,
    build_crd,
    build_crds,
    immutability_rule,
    to_structural,
)
from aiperf.crd.model import JOB_KIND, SWEEP_KIND, JobSpecSchema, SweepSpecSchema, WorkersStatus
from aiperf.crd.validation import SchemaValidator, structural_problems, to_jsonschema

KINDS = (JOB_KIND, SWEEP_KIND)


@pytest.mark.parametrize("kind", KINDS)
def test_the_crd_is_structural(kind: str) -> None:
    assert structural_problems(schema_of(kind)) == []


@pytest.mark.parametrize("kind", KINDS)
def test_every_rule_compiles(kind: str) -> None:
    rules = list(SchemaValidator(schema_of(kind)).rules())
    assert len(rules) > 40


def test_crd_envelope_is_namespaced_with_status_and_printer_columns() -> None:
    crd = build_crd(JOB_KIND)
    assert crd["metadata"]["name"] == "aiperfjobs.aiperf.nvidia.com"
    assert crd["spec"]["group"] == "aiperf.nvidia.com" and crd["spec"]["scope"] == "Namespaced"
    (version,) = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Phase"] == ".status.phase" and columns["Progress"] == ".status.progressPercent"
    assert columns["Requests"] == ".status.requestsCompleted" and columns["Age"] == ".metadata.creationTimestamp"
    assert build_crd(SWEEP_KIND)["metadata"]["name"] == "aiperfsweeps.aiperf.nvidia.com"


@pytest.mark.parametrize("kind", KINDS)
def test_printer_columns_point_at_declared_status_fields(kind: str) -> None:
    schema = schema_of(kind)
    for column in build_crd(kind)["spec"]["versions"][0]["additionalPrinterColumns"]:
        top, field = column["jsonPath"].lstrip(".").split(".")
        assert top == "metadata" or field in schema["properties"][top]["properties"], column


def test_spec_benchmark_is_kept_as_written_and_the_envelope_is_aiperfs() -> None:
    spec = schema_of(JOB_KIND)["properties"]["spec"]
    assert spec["required"] == ["benchmark"]
    assert set(spec["properties"]) == {
        "benchmark", "schemaVersion", "image", "imagePullPolicy", "resourceMode", "connectionsPerWorker",
        "timeoutSeconds", "ttlSecondsAfterFinished", "keepFailedPods", "cancel", "podTemplate", "variables",
        "randomSeed", "skipEndpointCheck", "noSweepTable", "multiRun", "failurePolicy", "scheduling",
        "resultsTtlDays", "plot"}
    benchmark = spec["properties"]["benchmark"]
    assert benchmark["type"] == "object" and benchmark["x-kubernetes-preserve-unknown-fields"] is True
    assert "properties" not in benchmark
    assert spec["properties"]["resourceMode"]["enum"] == ["burstable", "guaranteed", "none"]
    assert spec["properties"]["connectionsPerWorker"]["minimum"] == 1
    assert spec["properties"]["timeoutSeconds"]["minimum"] == 0
    pod = spec["properties"]["podTemplate"]["properties"]
    assert {"volumes", "volumeMounts", "affinity", "containerSecurityContext", "podSecurityContext",
            "initContainers", "extraPodSpec", "env", "resources"} <= set(pod)
    sweep = schema_of(SWEEP_KIND)["properties"]["spec"]
    assert set(sweep["properties"]) - set(spec["properties"]) == {"sweep", "childMetadata"}
    assert sweep["required"] == ["benchmark", "sweep"]
    assert sweep["properties"]["sweep"]["properties"]["type"]["enum"] == ["grid", "latin_hypercube", "scenarios", "sobol", "zip"]


@pytest.mark.parametrize(("kind", "mutable"), [(JOB_KIND, {"cancel", "timeoutSeconds"}),
                                               (SWEEP_KIND, {"cancel", "ttlSecondsAfterFinished"})])
def test_every_spec_field_but_the_mutable_set_is_immutable(kind: str, mutable: set[str]) -> None:
    spec = schema_of(kind)["properties"]["spec"]
    rules = {r["rule"] for r in spec["x-kubernetes-validations"] if "oldSelf" in r["rule"]}
    expected = {immutability_rule(f, mutable).rule for f in spec["properties"] if f not in mutable}
    assert rules == expected
    assert len(expected) == len(spec["properties"]) - 2
    assert "has(oldSelf.benchmark) == has(self.benchmark) && (!has(self.benchmark) || " \
           "oldSelf.benchmark == self.benchmark)" in rules


def test_status_has_the_lifecycle_surface() -> None:
    status = schema_of(JOB_KIND)["properties"]["status"]
    props = status["properties"]
    assert props["phase"]["enum"] == sorted(["Pending", "Queued", "Initializing", "Running", "Completed", "Failed",
                                             "Cancelled"])
    assert "profiling" in props["subPhase"]["enum"] and "processing" in props["subPhase"]["enum"]
    for field in ("currentPhase", "phases", "workers", "requestsCompleted", "requestsTotal", "requestsPerSecond",
                  "conditions", "observedGeneration", "startupIssue", "resultsPath", "runEpoch",
                  "controllerFailure", "resultsExported"):
        assert field in props, field
    phase = props["phases"]["additionalProperties"]["properties"]
    assert {"phaseName", "phaseKind", "phaseIndex", "profilingIndex"} <= set(phase)
    assert props["conditions"]["x-kubernetes-list-type"] == "map"
    assert all("default" not in node for _, node in walk(status))


def test_status_workers_declares_exactly_the_nine_keys_and_prunes_the_rest() -> None:
    workers = schema_of(JOB_KIND)["properties"]["status"]["properties"]["workers"]
    assert set(workers["properties"]) == {"ready", "total", "dispatchable", "routerConnected",
                                          "readyRecordProcessors", "declaredRecordProcessors", "readyPods",
                                          "totalPods", "degradedPods"}
    assert len(msgspec.structs.fields(WorkersStatus)) == 9
    assert "x-kubernetes-preserve-unknown-fields" not in workers


@pytest.mark.parametrize("kind", KINDS)
def test_free_form_nodes_are_only_the_known_maps(kind: str) -> None:
    free = {path for path, node in walk(schema_of(kind)) if node.get("x-kubernetes-preserve-unknown-fields")}
    # spec.benchmark and sweep scenarios: AIPerf's config body as written, read by the model;
    # sweep dimensions: read by the config model (aiperf.config.sweep.Dimension) when the spec is decoded;
    # podTemplate's Kubernetes objects: the API server checks them when the pods are created;
    # status.serverMetrics: the server-metrics projection, bounded by its own caps (aiperf.servermetrics.projection)
    pod = {f".spec.podTemplate.{k}" for k in ("affinity", "containerSecurityContext", "dnsConfig", "extraPodSpec",
                                               "hostAliases[]", "initContainers[]", "podSecurityContext",
                                               "topologySpreadConstraints[]", "volumeMounts[]", "volumes[]")}
    own = {".status.serverMetrics"} if kind == "AIPerfJob" else {".spec.sweep.parameters", ".spec.sweep.runs[].benchmark",
                                                                  ".spec.sweep.dimensions[]"}
    assert free == {".spec.benchmark", ".spec.variables", ".spec.plot", *pod, *own}


@pytest.mark.parametrize("kind", KINDS)
def test_every_default_is_valid_for_its_node_and_never_null(kind: str) -> None:
    found = 0
    for path, node in walk(schema_of(kind)):
        if "default" in node:
            found += 1
            assert node["default"] is not None, path
            without = {k: v for k, v in node.items() if k != "default"}
            jsonschema.Draft4Validator(to_jsonschema(without)).validate(node["default"])
    assert found > 20


def test_every_model_rule_has_a_cel_copy() -> None:
    """An envelope class with a `__post_init__` check must have CEL rules, or the API server
    would accept what the operator then rejects."""
    envelope = {cls for _, cls in inspect.getmembers(crd_model, inspect.isclass)
                if cls.__module__ == crd_model.__name__ and "__post_init__" in vars(cls)}
    assert envelope == set(ENVELOPE_MODELS)
    assert all(cls.cel_rules for cls in envelope)


def test_mutable_sets_are_spec_fields() -> None:
    for model in (JobSpecSchema, SweepSpecSchema):
        wire = {f.encode_name for f in msgspec.structs.fields(model)}
        assert model.MUTABLE <= wire


# -- the checker and the generator are not vacuous -------------------------------------------

def _object(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


@pytest.mark.parametrize(("node", "expected"), [
    (_object(a={"description": "no type"}), "needs a type"),
    (_object(a={"$ref": "#/x"}), "$ref is not allowed"),
    (_object(a={"anyOf": [{"type": "string"}, {"type": "integer"}]}), "anyOf is not allowed"),
    (_object(a={"type": "string", "x-kubernetes-preserve-unknown-fields": True}), "only with type: object"),
    (_object(a={"x-kubernetes-preserve-unknown-fields": True}), "needs a type"),
    ({**_object(a={"type": "string"}), "additionalProperties": False}, "properties and additionalProperties"),
    (_object(a={"type": "array"}), "one items schema"),
    (_object(a={"type": "number", "exclusiveMinimum": 0}), "exclusiveMinimum must be a boolean"),
    (_object(a={"type": "string", "propertyNames": {}}), "keywords Kubernetes does not know"),
    (_object(a={"type": "string", "default": None}), "default: null"),
    (_object(a={"type": "string", "enum": ["x", 1]}), "not of type string"),
    ({**_object(a={"type": "string"}), "required": ["b"]}, "undeclared properties"),
    ({**_object(a={"type": "string"}), "x-kubernetes-validations": [{"rule": "has(self.b)", "message": "m"}]},
     "undeclared field(s) ['b']"),
    ({**_object(a={"type": "string"}),
      "x-kubernetes-validations": [{"rule": "true", "message": "m", "fieldPath": ".b"}]}, "names no declared field"),
    (_object(a={"type": "array", "items": _object(k={"type": "string"}), "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["k"]}), "must be required"),
])
def test_the_structural_checker_catches(node: dict[str, Any], expected: str) -> None:
    found = structural_problems(node)
    assert any(expected in p for p in found), found


def test_the_real_schema_with_one_defect_fails_the_checker() -> None:
    schema = copy.deepcopy(schema_of(JOB_KIND))
    schema["properties"]["spec"]["properties"]["podTemplate"]["properties"]["affinity"].pop("type")
    assert structural_problems(schema) == [".spec.podTemplate.affinity: needs a type (got None)",
                                           ".spec.podTemplate.affinity: x-kubernetes-preserve-unknown-fields: "
                                           "true only with type: object"]


class _A(msgspec.Struct, tag="a", tag_field="type"):
    x: int = 0


class _B(msgspec.Struct, tag="b", tag_field="type"):
    x: str = ""


class _Untagged(msgspec.Struct):
    v: int | str


class _Conflict(msgspec.Struct):
    v: list[_A | _B]


@pytest.mark.parametrize(("model", "expected"), [
    (_Untagged, "no structural form"),
    (_Conflict, "declare it differently"),
])
def test_the_generator_refuses_what_it_cannot_express(model: type, expected: str) -> None:
    with pytest.raises(GeneratorError, match=expected):
        to_structural(msgspec.json.schema(model), rules={})


def test_the_generated_crds_are_stable() -> None:
    assert build_crds() == build_crds()
