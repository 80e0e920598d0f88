"""Every generated object validates: Kubernetes schemas (strict, 1.32), our JobSet schema, and our
own checks for what schemas miss."""

from __future__ import annotations

import copy

import jsonschema
import kubernetes_validate
import pytest
from _kube_checks import problems, validate_all, validate_builtin, validate_jobset
from hypothesis import given, settings
from hypothesis import strategies as st

from aiperf.kube import KubeSettings, build_all, build_jobset


@pytest.mark.parametrize("case", ["typical", "uneven"])
def test_every_object_validates(case: str, request: pytest.FixtureRequest) -> None:
    settings_, run_config = request.getfixturevalue(case)
    objects = build_all(settings_, run_config)
    own_account = ["ServiceAccount"] if settings_.service_account is None else []
    assert [o["kind"] for o in objects] == [*own_account, "Role", "RoleBinding", "Secret", "ConfigMap",
                                            "JobSet"]
    validate_all(objects)
    assert problems(objects) == []


@settings(max_examples=15, deadline=None)
@given(total=st.integers(1, 60), per_pod=st.integers(1, 16), rps=st.none() | st.integers(1, 4),
       name=st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True).filter(lambda n: "--" not in n))
def test_any_layout_validates(total: int, per_pod: int, rps: int | None, name: str, run_config_of) -> None:
    objects = build_all(KubeSettings(name=name, total_workers=total, workers_per_pod=per_pod,
                                     record_processors_per_pod=rps), run_config_of())
    validate_all(objects)
    assert problems(objects) == []


def test_schema_and_checks_are_not_vacuous(typical) -> None:
    jobset = build_jobset(*typical)
    broken = copy.deepcopy(jobset)
    broken["spec"]["successPolicy"]["operator"] = "Most"
    with pytest.raises(jsonschema.ValidationError):
        validate_jobset(broken)
    broken = copy.deepcopy(jobset)
    broken["spec"]["network"]["enableDnsHostnames"] = True  # misspelt field
    with pytest.raises(jsonschema.ValidationError):
        validate_jobset(broken)
    broken = copy.deepcopy(jobset)
    pod = broken["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["imagePullPolicy"] = 3
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_jobset(broken)
    pod["containers"][0]["imagePullPolicy"] = "Always"
    pod["containers"][1]["name"] = pod["containers"][0]["name"]
    pod["containers"][1]["ports"][0]["containerPort"] = pod["containers"][0]["ports"][0]["containerPort"]
    found = problems([broken])
    assert any("container names repeat" in p for p in found)
    assert any("container ports repeat" in p for p in found)


def test_role_binding_without_api_group_is_caught(typical) -> None:
    binding = next(o for o in build_all(*typical) if o["kind"] == "RoleBinding")
    validate_builtin(binding)
    del binding["roleRef"]["apiGroup"]
    assert any("roleRef.apiGroup" in p for p in problems([binding]))
