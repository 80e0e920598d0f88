"""Secrets: only Secret references in the manifests, never values; fail closed when one is missing."""

from __future__ import annotations

import base64
import json
import os
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiperf.kube import (
    KubeConfigError,
    KubeSettings,
    build_all,
    build_config_map,
    build_jobset,
    secret_values_from_env,
    to_yaml,
)

_SECRET_TEXT = st.binary(min_size=12, max_size=30).map(lambda raw: "sk-" + base64.b64encode(raw).decode())
"""Token-like secrets (as API keys are): a short common word would also match ordinary manifest
text, which the leak check would then rightly refuse."""


@pytest.mark.parametrize("builder", [build_config_map, build_jobset, build_all])
def test_headers_without_a_secret_fail_closed(builder, run_config_of) -> None:
    run_config = run_config_of(header_names=["X-Tenant"])
    with pytest.raises(KubeConfigError) as info:
        builder(KubeSettings(name="h"), run_config)
    message = str(info.value)
    assert "\n" not in message and "AIPERF_HEADERS_JSON" in message and "headers_secret" in message


def test_api_key_without_a_secret_fails_closed(run_config_of) -> None:
    with pytest.raises(KubeConfigError, match="AIPERF_API_KEY.*api_key_secret"):
        build_all(KubeSettings(name="k", require_api_key=True), run_config_of())


def test_either_mapping_form_satisfies_the_check(run_config_of) -> None:
    run_config = run_config_of(header_names=["X-Tenant"])
    via_env = KubeSettings(name="h", env_from_secrets={"AIPERF_HEADERS_JSON": "hdr/json"})
    via_field = KubeSettings(name="h", headers_secret="hdr/json")
    assert build_jobset(via_env, run_config) == build_jobset(via_field, run_config)


def test_endpoint_secrets_reach_worker_containers_only(typical) -> None:
    jobs = {r["name"]: r for r in build_jobset(*typical)["spec"]["replicatedJobs"]}
    ref = {"name": "AIPERF_API_KEY", "valueFrom": {"secretKeyRef": {"name": "llm-api", "key": "api-key"}}}
    for job, containers in ((name, r["template"]["spec"]["template"]["spec"]["containers"])
                            for name, r in jobs.items()):
        for c in containers:
            is_worker = c["image"].endswith("/aiperf/worker:0.1.0")
            assert (ref in c["env"]) == is_worker, (job, c["name"])


def test_plain_secret_env_reaches_every_service_container(uneven) -> None:
    ref = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}
    for rjob in build_jobset(*uneven)["spec"]["replicatedJobs"]:
        containers = rjob["template"]["spec"]["template"]["spec"]["containers"]
        assert all(ref in c["env"] for c in containers if c["name"] != "results-sidecar")
        # the results sidecar only serves files: no secret reaches it
        assert all(e["name"] == "AIPERF_HEALTH_PORT" for c in containers if c["name"] == "results-sidecar"
                   for e in c["env"])


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"env_vars": {"AIPERF_API_KEY": "sk-123"}}, "api_key_secret"),
    ({"env_vars": {"AIPERF_HEADERS_JSON": "{}"}}, "headers_secret"),
    ({"api_key_secret": "no-key-here"}, "SECRET/KEY"),
    ({"env_from_secrets": {"X": "Bad_Secret/key"}}, "SECRET/KEY"),
    ({"api_key_secret": "a/b", "env_from_secrets": {"AIPERF_API_KEY": "c/d"}}, "keep one"),
    ({"env_vars": {"AIPERF_CONTROLLER_HOST": "x"}}, "set by aiperf"),
])
def test_secret_settings_mistakes_are_one_line_errors(kwargs: dict, match: str) -> None:
    with pytest.raises(KubeConfigError, match=match) as info:
        KubeSettings(name="s", **kwargs)
    assert "\n" not in str(info.value)


@settings(max_examples=40, deadline=None)
@given(api_key=_SECRET_TEXT, headers=st.dictionaries(
    st.from_regex(r"X-[A-Za-z]{1,12}", fullmatch=True), _SECRET_TEXT, min_size=1, max_size=4))
def test_secret_values_never_reach_the_manifests(api_key: str, headers: dict[str, str],
                                                 run_config_of) -> None:
    env = {"AIPERF_API_KEY": api_key, "AIPERF_HEADERS_JSON": json.dumps(headers)}
    secrets = secret_values_from_env(env)
    assert sorted(secrets) == sorted([api_key, *headers.values()])
    run_config = run_config_of(header_names=sorted(headers))
    kube = KubeSettings(name="p", total_workers=3, api_key_secret="llm/key", headers_secret="llm/headers",
                        require_api_key=True)
    with mock.patch.dict(os.environ, env):  # the builders must not read secrets from anywhere
        text = to_yaml(build_all(kube, run_config, known_secrets=secrets))
    for value in secrets:
        assert value not in text
    for name in headers:
        assert name in text  # names travel in the run config, values never


@pytest.mark.parametrize("where", ["env_vars", "extra_inputs"])
def test_a_secret_smuggled_in_is_refused(where: str, run_config_of) -> None:
    secret = "sk-live-0123456789abcdef"
    if where == "env_vars":
        kube, run_config = KubeSettings(name="l", env_vars={"OPENAI_KEY": secret}), run_config_of()
    else:
        kube, run_config = KubeSettings(name="l"), run_config_of(extra={"api_key": secret})
    with pytest.raises(KubeConfigError, match="never as values") as info:
        build_all(kube, run_config, known_secrets=[secret])
    assert secret not in str(info.value)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"name": "Bad_Name"}, "name 'Bad_Name'"),
    ({"name": "a" * 40, "total_workers": 30, "workers_per_pod": 7}, "exceed 63"),
    ({"name": "x", "total_workers": 0}, "total_workers"),
    ({"name": "x", "resources": {"gpu-manager": {}}}, "not a service type"),
    ({"name": "x", "labels": {"app.kubernetes.io/name": "other"}}, "set by aiperf"),
])
def test_settings_mistakes_are_one_line_errors(kwargs: dict, match: str) -> None:
    with pytest.raises(KubeConfigError, match=match):
        KubeSettings(**kwargs)
