"""The Role is pinned: least privilege, `patch` the only write verb, on our own objects only
(by name where the run knows it); the pods run as the run's own ServiceAccount."""

from __future__ import annotations

from aiperf.kube import KubeSettings, build_all, build_role, build_role_binding, build_service_account

EXPECTED_RULES = [
    {"apiGroups": ["aiperf.nvidia.com"], "resources": ["aiperfjobs", "aiperfjobs/status"],
     "verbs": ["get", "list", "watch", "patch"], "resourceNames": ["r"]},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"],
     "resourceNames": ["aiperf-r-config"]},
    {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["services", "endpoints"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["get", "list", "watch", "patch"],
     "resourceNames": ["aiperf-r"]},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/status"], "verbs": ["get", "list", "watch"],
     "resourceNames": ["aiperf-r"]},
]


def test_role_rules_are_exactly_the_pinned_set() -> None:
    role = build_role(KubeSettings(name="r"))
    assert role["rules"] == EXPECTED_RULES


def test_patch_is_the_only_write_verb_and_only_on_our_objects() -> None:
    rules = build_role(KubeSettings(name="r"))["rules"]
    verbs = {v for rule in rules for v in rule["verbs"]}
    assert verbs == {"get", "list", "watch", "patch"}
    patched = {r for rule in rules if "patch" in rule["verbs"] for r in rule["resources"]}
    assert patched == {"aiperfjobs", "aiperfjobs/status", "jobsets"}
    assert all("*" not in rule["resources"] + rule["verbs"] + rule["apiGroups"] for rule in rules)


def test_role_binding_binds_the_role_to_the_pods_account() -> None:
    settings = KubeSettings(name="r", namespace="ns", service_account="runner")
    binding = build_role_binding(settings)
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": build_role(settings)["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "runner", "namespace": "ns"}]
    assert build_role_binding(KubeSettings(name="r"))["subjects"][0]["name"] == "aiperf-r"


def test_the_run_gets_its_own_service_account_unless_one_is_named(run_config_of) -> None:  # type: ignore[no-untyped-def]
    own = build_service_account(KubeSettings(name="r", namespace="ns"))
    assert own is not None and (own["kind"], own["metadata"]["name"], own["metadata"]["namespace"]) == \
        ("ServiceAccount", "aiperf-r", "ns")
    assert build_service_account(KubeSettings(name="r", service_account="runner")) is None
    assert "default" not in {o["metadata"]["name"] for o in build_all(KubeSettings(name="r"), run_config_of())}
