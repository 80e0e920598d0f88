"""The Helm chart: every object valid for Kubernetes 1.32 (kubernetes-validate, strict), RBAC
pinned to least privilege, and the pieces agree with each other and with the code (ports,
names, the operator's flags, the per-run Role)."""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest
import yaml
from _chart import TemplateError, crds, render, render_text
from _repo import chart_dir

from aiperf.config.catalog import RESULTS_SERVER
from aiperf.kube import RULES
from aiperf.kube.containers import BOUND_PORTS
from aiperf.kubeapi import Obj
from aiperf.operator.main import DEFAULT_HEALTH_PORT, DEFAULT_METRICS_PORT, build_parser
from aiperf.results_server.main import build_parser as results_server_flags

((_, DEFAULT_RESULTS_PORT),) = RESULTS_SERVER.ports

KUBERNETES_VERSION = "1.32.0"  # as libs/kube/tests/_kube_checks.py
RESULTS_CONTAINER_PORT = 9091  # the controller pod's results container (ARCHITECTURE.md, section 7)


@pytest.fixture(scope="module")
def objects() -> list[Obj]:
    return render(chart_dir())


def one(objects: list[Obj], kind: str, name: str) -> Obj:
    (found,) = (o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)
    return found


def triples(rules: list[Obj]) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) of every grant in `rules`."""
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def test_the_chart_renders_the_expected_objects(objects: list[Obj]) -> None:
    assert sorted((o["kind"], o["metadata"]["name"]) for o in objects) == sorted([
        ("Deployment", "aiperf-operator"), ("NetworkPolicy", "aiperf-operator"), ("NetworkPolicy", "aiperf-runs"),
        ("PersistentVolumeClaim", "aiperf-operator-results"), ("ClusterRole", "aiperf-operator"),
        ("ClusterRoleBinding", "aiperf-operator"), ("Role", "aiperf-benchmark"), ("Service", "aiperf-operator"),
        ("ServiceAccount", "aiperf-operator"), ("Role", "aiperf-results-reader"),
        ("RoleBinding", "aiperf-results-reader")])
    namespaced = [o for o in objects if not o["kind"].startswith("Cluster")]
    assert {o["metadata"]["namespace"] for o in namespaced} == {"aiperf-system"}
    chart = yaml.safe_load((chart_dir() / "Chart.yaml").read_text())
    assert (chart["apiVersion"], chart["name"], chart["type"]) == ("v2", "aiperf-operator", "application")


def test_every_object_and_crd_is_valid_for_kubernetes(objects: list[Obj]) -> None:
    for obj in [*objects, *crds(chart_dir())]:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_validation_is_not_vacuous(objects: list[Obj]) -> None:
    deployment = copy.deepcopy(one(objects, "Deployment", "aiperf-operator"))
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["pth"] = "/healthz"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


EXPECTED_OPERATOR_RULES = [
    {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["aiperf.nvidia.com"],
     "resources": ["aiperfjobs", "aiperfsweeps", "aiperfjobs/status", "aiperfsweeps/status"],
     "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": ["aiperf.nvidia.com"], "resources": ["aiperfjobs/finalizers", "aiperfsweeps/finalizers"],
     "verbs": ["update"]},
    {"apiGroups": ["aiperf.nvidia.com"], "resources": ["aiperfjobs"], "verbs": ["create"]},
    {"apiGroups": ["aiperf.nvidia.com"], "resources": ["aiperfsweeps"], "verbs": ["delete"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch", "create", "patch"]},
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get", "create"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create"]},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "create"]},
    {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/proxy"], "verbs": ["get", "create"]},
    {"apiGroups": [""], "resources": ["services", "endpoints"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"],
     "verbs": ["get", "list", "watch", "create", "patch", "delete"]},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/status"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["get", "create"]},
]


def test_the_operator_cluster_role_is_exactly_the_pinned_set(objects: list[Obj]) -> None:
    rules = one(objects, "ClusterRole", "aiperf-operator")["rules"]
    assert rules == EXPECTED_OPERATOR_RULES
    assert all("*" not in r["apiGroups"] + r["resources"] + r["verbs"] for r in rules)
    assert not {"escalate", "bind", "impersonate", "deletecollection"} & {v for r in rules for v in r["verbs"]}
    # update only on the CRs' finalizers: what blockOwnerDeletion needs on OpenShift (issue 23, item 3).
    assert {r for g, r, v in triples(rules) if v == "update"} == {"aiperfjobs/finalizers", "aiperfsweeps/finalizers"}
    assert {r for g, r, v in triples(rules) if v == "delete"} == {"jobsets", "aiperfsweeps"}
    # Secrets: the run's CURVE key Secret is created (and read by name on a conflict), never listed.
    assert {v for _, r, v in triples(rules) if r == "secrets"} == {"get", "create"}


def test_the_operator_holds_every_grant_of_the_run_role_it_creates(objects: list[Obj]) -> None:
    """The API server lets a subject create a Role only with rules it holds itself (no escalate)."""
    python_role = {(g, r, v) for g, resources, verbs in RULES for r in resources for v in verbs}
    assert python_role <= triples(one(objects, "ClusterRole", "aiperf-operator")["rules"])


def test_the_operator_holds_every_grant_of_the_sweep_controller_role_it_creates(objects: list[Obj]) -> None:
    from aiperf.operator.sweep_desired import SWEEP_RULES

    sweep_role = {(g, r, v) for g, resources, verbs, _ in SWEEP_RULES for r in resources for v in verbs}
    assert sweep_role <= triples(one(objects, "ClusterRole", "aiperf-operator")["rules"])


def test_the_charts_benchmark_role_is_a_subset_of_the_run_role(objects: list[Obj]) -> None:
    chart_role = one(objects, "Role", "aiperf-benchmark")["rules"]
    python_role = {(g, r, v) for g, resources, verbs in RULES for r in resources for v in verbs}
    assert triples(chart_role) <= python_role
    assert {v for _, _, v in triples(chart_role)} == {"get", "list", "watch", "patch"}
    assert {r for _, r, v in triples(chart_role) if v == "patch"} == {"aiperfjobs", "aiperfjobs/status", "jobsets"}


def test_the_binding_ties_the_cluster_role_to_the_operators_account(objects: list[Obj]) -> None:
    binding = one(objects, "ClusterRoleBinding", "aiperf-operator")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": "aiperf-operator"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "aiperf-operator",
                                    "namespace": "aiperf-system"}]


@pytest.mark.anyio
async def test_any_service_account_may_read_stored_results_through_the_proxy_and_nothing_else(
        objects: list[Obj]) -> None:
    """Issue 23, item 6: a sweep-controller (its own ServiceAccount, in the sweep's namespace)
    falls back to the operator's results server through services/proxy; the chart lets it `get`
    that one port of the operator's Service (RBAC enforced by the fake as the API server does)."""
    import aiohttp
    from aiohttp import web

    from aiperf.testing.fake_kube import FakeKube

    async def answer(request: web.Request, path: str) -> web.StreamResponse:
        return web.Response(text="stored:" + path)

    async with FakeKube(namespaces=["aiperf-system", "bench"], rbac=True) as kube:
        for obj in objects:
            if obj["metadata"]["name"] == "aiperf-results-reader" or obj["kind"] == "Service":
                kube.create(obj)
        labels = one(objects, "Service", "aiperf-operator")["spec"]["selector"]
        kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "op", "namespace": "aiperf-system",
                                                                     "labels": labels},
                     "spec": {"containers": [{"name": "operator", "image": "x", "ports": [
                         {"name": "http-results", "containerPort": 8081},
                         {"name": "http-metrics", "containerPort": 8082}]}]}})
        kube.run_pod("aiperf-system", "op")
        for port in (8081, 8082):
            kube.register_proxy("aiperf-system", "op", port, answer)
        headers = {"Authorization": f"Bearer {kube.token_for('bench', 'aiperf-sweep-sw')}"}
        base = f"{kube.url}/api/v1/namespaces/aiperf-system"
        async with aiohttp.ClientSession(headers=headers) as http:
            async def status(method: str, path: str) -> int:
                async with http.request(method, base + path) as response:
                    return response.status

            assert await status("GET", "/services/aiperf-operator:8081/proxy/api/v1/results") == 200
            assert await status("GET", "/services/aiperf-operator:http-results/proxy/api/v1/results") == 200
            assert await status("POST", "/services/aiperf-operator:8081/proxy/api/v1/results") == 403
            assert await status("GET", "/services/aiperf-operator:8082/proxy/metrics") == 403
            assert await status("GET", "/services/aiperf-operator:http-metrics/proxy/metrics") == 403
            assert await status("GET", "/pods/op:8081/proxy/api/v1/results") == 403
            assert await status("GET", "/services") == 403


def _operator_pod(objects: list[Obj]) -> Obj:
    pod: Obj = one(objects, "Deployment", "aiperf-operator")["spec"]["template"]
    return pod


def test_the_deployment_runs_the_operator_image_with_probes_account_and_volume(objects: list[Obj]) -> None:
    pod = _operator_pod(objects)
    container, _ = pod["spec"]["containers"]
    assert container["name"] == "operator" and container["image"] == "aiperf/operator:latest"
    assert pod["spec"]["serviceAccountName"] == one(objects, "ServiceAccount", "aiperf-operator")["metadata"]["name"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http-health": DEFAULT_HEALTH_PORT, "http-metrics": DEFAULT_METRICS_PORT}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "http-health"}, probe
    args = build_parser().parse_args(container["args"])  # the flags exist and agree with the ports
    assert (args.health_port, args.metrics_port) == (8080, 8082)
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["results"] == args.results_dir
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"]
              if "persistentVolumeClaim" in v}
    assert claims == {"results": one(objects, "PersistentVolumeClaim", "aiperf-operator-results")["metadata"]["name"]}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True


def test_the_results_server_serves_the_same_volume_on_8081(objects: list[Obj]) -> None:
    operator, server = _operator_pod(objects)["spec"]["containers"]
    assert server["name"] == RESULTS_SERVER.name and server["image"] == "aiperf/results-server:latest"
    flags = results_server_flags().parse_args(server["args"])
    assert (flags.port, flags.host, flags.layout) == (DEFAULT_RESULTS_PORT, "0.0.0.0", "volume")
    assert flags.in_cluster and flags.kubeconfig is None  # live job status for the dashboard
    # ... as the pod's ServiceAccount, whose token must be mounted
    assert _operator_pod(objects)["spec"].get("automountServiceAccountToken", True) is True
    assert one(objects, "ServiceAccount", "aiperf-operator").get("automountServiceAccountToken", True) is True
    assert {p["name"]: p["containerPort"] for p in server["ports"]} == {"http-results": DEFAULT_RESULTS_PORT}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert server[probe]["httpGet"] == {"path": "/healthz", "port": "http-results"}, probe
    mounts = {m["name"]: m["mountPath"] for m in server["volumeMounts"]}
    assert mounts["results"] == flags.base == build_parser().parse_args(operator["args"]).results_dir
    # Both sides apply the same retention.
    keep = [{e["name"]: e["value"] for e in c["env"]}["AIPERF_RESULTS_KEEP"] for c in (operator, server)]
    assert keep == ["10", "10"]
    assert server["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_startup_thresholds_reach_the_operator_through_its_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    tuned = render(chart_dir(), overrides={"startup": {"warnAfterSeconds": 30, "failAfterSeconds": 120,
                                                       "unschedulableFailAfterSeconds": 900}})
    container = _operator_pod(tuned)["spec"]["containers"][0]
    for env in container["env"]:
        monkeypatch.setenv(env["name"], env["value"])
    args = build_parser().parse_args(container["args"])
    assert (args.startup_warn_after, args.startup_fail_after, args.startup_unschedulable_fail_after) == (30, 120, 900)


def test_the_service_selects_the_operator_pod_by_named_ports(objects: list[Obj]) -> None:
    service = one(objects, "Service", "aiperf-operator")
    pod = _operator_pod(objects)
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    names = {p["name"] for c in pod["spec"]["containers"] for p in c["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= names
    assert "http-health" not in {p["name"] for p in service["spec"]["ports"]}


def _ports(rule: Obj) -> set[int]:
    return {p["port"] for p in rule["ports"]}


def test_run_pods_are_reached_only_by_aiperf_pods_the_operator_and_the_api_server(objects: list[Obj]) -> None:
    policy = one(objects, "NetworkPolicy", "aiperf-runs")
    assert policy["spec"]["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "aiperf"}}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    peers, operator = policy["spec"]["ingress"]
    zmq_and_api = {port for _, port in BOUND_PORTS.values()}
    assert _ports(peers) == zmq_and_api | {RESULTS_CONTAINER_PORT}
    assert peers["from"] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "aiperf"}}}]
    assert _ports(operator) == {9090, RESULTS_CONTAINER_PORT}
    assert operator["from"] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "aiperf-operator"}}},
                                {"ipBlock": {"cidr": "10.0.0.0/8"}}]


def test_the_operator_is_reached_only_through_the_api_server_and_by_monitoring(objects: list[Obj]) -> None:
    policy = one(objects, "NetworkPolicy", "aiperf-operator")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= _operator_pod(objects)["metadata"]["labels"].items()
    api_server, monitoring = policy["spec"]["ingress"]
    assert api_server["from"] == [{"ipBlock": {"cidr": "10.0.0.0/8"}}]
    assert monitoring["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    assert _ports(monitoring) == {DEFAULT_METRICS_PORT}


def test_no_ingress_rule_is_open_to_every_source_or_port(objects: list[Obj]) -> None:
    for policy in (o for o in objects if o["kind"] == "NetworkPolicy"):
        for rule in policy["spec"]["ingress"]:
            assert rule.get("from") and rule.get("ports"), (policy["metadata"]["name"], rule)


def test_values_flow_into_the_objects() -> None:
    objects = render(chart_dir(), namespace="bench", overrides={
        "image": {"repository": "registry.example.com/aiperf/operator", "tag": "0.2.0"},
        "results": {"size": "1Ti"}, "networkPolicy": {"apiServerCIDR": "172.20.0.0/16"}})
    container = _operator_pod(objects)["spec"]["containers"][0]
    assert container["image"] == "registry.example.com/aiperf/operator:0.2.0"
    assert container["imagePullPolicy"] == "IfNotPresent"
    pvc = one(objects, "PersistentVolumeClaim", "aiperf-operator-results")
    assert pvc["spec"]["resources"]["requests"]["storage"] == "1Ti"
    assert one(objects, "NetworkPolicy", "aiperf-runs")["spec"]["ingress"][1]["from"][1]["ipBlock"]["cidr"] == \
        "172.20.0.0/16"
    assert one(objects, "ClusterRoleBinding", "aiperf-operator")["subjects"][0]["namespace"] == "bench"
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize(("text", "expected"), [
    ("a: {{ if .Values.x }}", "unsupported template action"),
    ("a: {{ .Values.image.tag | quote }}", "unsupported template action"),
    ("a: {{ .Values.nothing }}", "no such value"),
    ("a: {{ .Values.image }}", "not a scalar"),
])
def test_the_renderer_refuses_what_it_would_render_unlike_helm(text: str, expected: str) -> None:
    with pytest.raises(TemplateError, match=expected):
        render_text(text, vals={"image": {"tag": "x"}}, namespace="n", release="r")
