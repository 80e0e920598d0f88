"""The Role is pinned: least privilege, `patch` the only write verb, on our own objects only."""

from __future__ import annotations

from aiperf.kube import KubeSettings, build_role, build_role_binding

EXPECTED_RULES = [
    {"apiGroups": ["aiperf.nvidia.com"], "resources": ["aiperfjobs", "aiperfjobs/status"],
     "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["services", "endpoints"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/status"], "verbs": ["get", "list", "watch"]},
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
    assert build_role_binding(KubeSettings(name="r"))["subjects"][0]["name"] == "default"
