"""Direct-mode runs (`aiperf.kuberun.direct`) against the fake API server: results, and the exact
requests made."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from aiperf.kubeapi import JOBSETS, MAX_BROKEN_WATCHES, KubeApi, KubeError, connect
from aiperf.kuberun import direct
from aiperf.kuberun.direct import JobState
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio

NS = "bench"
JS_PATH = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/bench/jobsets"
JS_API = "jobset.x-k8s.io/v1alpha2"
RBAC = "rbac.authorization.k8s.io/v1"
LABELS = {"app.kubernetes.io/name": "aiperf", "app.kubernetes.io/instance": "demo"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def kube() -> AsyncIterator[FakeKube]:
    async with FakeKube(namespaces=[NS], default_namespace=NS) as fake:
        yield fake


@pytest.fixture
async def api(kube: FakeKube) -> AsyncIterator[KubeApi]:
    async with await connect(kube.kubeconfig_path, None) as client:
        yield client


def meta(name: str) -> dict[str, Any]:
    return {"name": name, "namespace": NS, "labels": dict(LABELS)}


def run_objects(run: str = "demo") -> list[dict[str, Any]]:
    """Role, RoleBinding, ConfigMap, JobSet of a run, deliberately out of order."""
    return [
        {"apiVersion": JS_API, "kind": "JobSet", "metadata": meta(f"aiperf-{run}"),
         "spec": {"replicatedJobs": [{"name": "controller", "replicas": 1}]}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(f"aiperf-{run}-config"),
         "data": {"run_config.json": "{}"}},
        {"apiVersion": RBAC, "kind": "RoleBinding", "metadata": meta(f"aiperf-{run}"),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"aiperf-{run}"},
         "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": NS}]},
        {"apiVersion": RBAC, "kind": "Role", "metadata": meta(f"aiperf-{run}"), "rules": []},
    ]


def add_jobset(kube: FakeKube, name: str, status: dict[str, Any] | None = None,
               **spec: Any) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": "aiperf", "app.kubernetes.io/instance": name}
    obj = kube.create({"apiVersion": JS_API, "kind": "JobSet",
                       "metadata": {"name": f"aiperf-{name}", "namespace": NS, "labels": labels},
                       "spec": {"replicatedJobs": [], **spec}})
    if status is not None:
        obj = kube.set_status(JS_API, "JobSet", NS, f"aiperf-{name}", status)
    return obj


def condition(kind: str) -> dict[str, Any]:
    return {"conditions": [{"type": kind, "status": "True"}]}


async def test_ensure_namespace_exists(kube: FakeKube, api: KubeApi) -> None:
    await direct.ensure_namespace_exists(api, NS)
    with pytest.raises(KubeError) as exc:
        await direct.ensure_namespace_exists(api, "absent")
    assert str(exc.value) == "namespace absent does not exist; create it first (it is never created for you)"
    assert [(r.method, r.path) for r in kube.requests] == [
        ("GET", "/api/v1/namespaces/bench"), ("GET", "/api/v1/namespaces/absent")]


# -- create ------------------------------------------------------------------------------------

async def test_create_all_creates_in_dependency_order(kube: FakeKube, api: KubeApi) -> None:
    objects = run_objects()
    created = await direct.create_all(api, objects)
    assert [o["kind"] for o in created] == ["Role", "RoleBinding", "ConfigMap", "JobSet"]
    assert all(o["metadata"]["uid"] for o in created)
    posts = kube.requests_for("POST")
    assert [(r.path, r.content_type) for r in posts] == [
        ("/apis/rbac.authorization.k8s.io/v1/namespaces/bench/roles", "application/json"),
        ("/apis/rbac.authorization.k8s.io/v1/namespaces/bench/rolebindings", "application/json"),
        ("/api/v1/namespaces/bench/configmaps", "application/json"),
        (JS_PATH, "application/json")]
    assert [r.body for r in posts] == [objects[3], objects[2], objects[1], objects[0]]
    assert len(kube.requests) == 4


async def test_create_all_on_an_existing_name_says_to_delete_first_and_rolls_back(
        kube: FakeKube, api: KubeApi) -> None:
    kube.create(run_objects()[1])  # the ConfigMap of an earlier run is still there
    with pytest.raises(KubeError) as exc:
        await direct.create_all(api, run_objects())
    assert str(exc.value) == ("ConfigMap aiperf-demo-config already exists in namespace bench; run "
                              "`aiperf kube delete demo -n bench` first (or choose another --name)")
    assert [(r.method, r.path.rsplit("/", 2)[-2:]) for r in kube.requests] == [
        ("POST", ["bench", "roles"]), ("POST", ["bench", "rolebindings"]), ("POST", ["bench", "configmaps"]),
        ("DELETE", ["rolebindings", "aiperf-demo"]), ("DELETE", ["roles", "aiperf-demo"])]
    rollback = kube.requests_for("DELETE")[0]
    assert rollback.body["preconditions"]["uid"]
    assert kube.get(RBAC, "Role", NS, "aiperf-demo") is None
    assert kube.get(RBAC, "RoleBinding", NS, "aiperf-demo") is None
    assert kube.get(JS_API, "JobSet", NS, "aiperf-demo") is None
    assert kube.get("v1", "ConfigMap", NS, "aiperf-demo-config") is not None  # not ours to remove


async def test_create_all_in_a_missing_namespace(kube: FakeKube, api: KubeApi) -> None:
    objects = run_objects()
    for obj in objects:
        obj["metadata"]["namespace"] = "absent"
    with pytest.raises(KubeError, match=r"^namespace absent does not exist; create it first"):
        await direct.create_all(api, objects)
    assert len(kube.requests) == 1


# -- read --------------------------------------------------------------------------------------

async def test_summaries_report_state_from_jobset_conditions(kube: FakeKube, api: KubeApi) -> None:
    add_jobset(kube, "a-running", {"conditions": [{"type": "Completed", "status": "False"}]})
    add_jobset(kube, "b-done", condition("Completed"))
    add_jobset(kube, "c-failed", condition("Failed"))
    add_jobset(kube, "d-cancelled", suspend=True)
    add_jobset(kube, "e-terminal", {"terminalState": "Failed"})
    kube.create({"apiVersion": JS_API, "kind": "JobSet", "metadata": {"name": "not-ours", "namespace": NS},
                 "spec": {}})
    listing = await api.list_all(JOBSETS, NS, label_selector=direct.RUN_SELECTOR)
    jobs = sorted(map(direct.summarize, listing.items), key=lambda j: j.name)
    assert [(j.name, j.jobset, j.state) for j in jobs] == [
        ("a-running", "aiperf-a-running", JobState.RUNNING), ("b-done", "aiperf-b-done", JobState.COMPLETED),
        ("c-failed", "aiperf-c-failed", JobState.FAILED),
        ("d-cancelled", "aiperf-d-cancelled", JobState.SUSPENDED),
        ("e-terminal", "aiperf-e-terminal", JobState.FAILED)]
    assert all(j.created and j.uid and j.namespace == NS for j in jobs)
    assert kube.requests[-1].query == {"labelSelector": "app.kubernetes.io/name=aiperf", "limit": "500"}
    assert await direct.get_jobset(api, "nothing", NS) is None


# -- watch -------------------------------------------------------------------------------------

async def test_watch_until_completed(kube: FakeKube, api: KubeApi) -> None:
    created = add_jobset(kube, "demo")
    seen: list[JobState] = []
    result: list[JobState] = []

    async def watch() -> None:
        result.append(await direct.watch_jobset_until_done(api, "demo", NS, lambda s, _: seen.append(s)))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            while not kube.store.watchers:
                await anyio.sleep(0.01)
            kube.set_status(JS_API, "JobSet", NS, "aiperf-demo", {"conditions": [
                {"type": "StartupPolicyCompleted", "status": "True"}]})
            kube.set_status(JS_API, "JobSet", NS, "aiperf-demo", condition("Completed"))
    assert result == [JobState.COMPLETED]
    assert seen == [JobState.RUNNING, JobState.RUNNING, JobState.COMPLETED]
    get, watch_request = kube.requests
    assert (get.method, get.path) == ("GET", f"{JS_PATH}/aiperf-demo")
    assert (watch_request.path, watch_request.query) == (JS_PATH, {
        "watch": "true", "fieldSelector": "metadata.name=aiperf-demo",
        "resourceVersion": created["metadata"]["resourceVersion"], "allowWatchBookmarks": "true",
        "timeoutSeconds": "300"})


async def test_watch_rereads_after_410_and_returns_on_suspend(kube: FakeKube, api: KubeApi) -> None:
    add_jobset(kube, "demo")
    calls: list[JobState] = []

    def on_event(state: JobState, jobset: dict[str, Any]) -> None:
        calls.append(state)
        if len(calls) == 1:  # a change, then the history is compacted before the watch starts
            kube.set_status(JS_API, "JobSet", NS, "aiperf-demo", {"restarts": 0})
            kube.compact()
        elif len(calls) == 2:
            kube.update(dict(jobset, spec={"replicatedJobs": [], "suspend": True}))

    with anyio.fail_after(10):
        state = await direct.watch_jobset_until_done(api, "demo", NS, on_event)
    assert state == JobState.SUSPENDED and calls == [JobState.RUNNING, JobState.RUNNING, JobState.SUSPENDED]
    assert [(r.method, "watch" in r.query) for r in kube.requests] == [
        ("GET", False), ("GET", True), ("GET", False), ("GET", True)]


async def test_watch_fails_clearly_when_the_jobset_is_deleted_or_missing(kube: FakeKube,
                                                                        api: KubeApi) -> None:
    with pytest.raises(KubeError, match=r"^no run demo in namespace bench \(JobSet aiperf-demo not found\)$"):
        await direct.watch_jobset_until_done(api, "demo", NS)
    add_jobset(kube, "demo")

    def on_event(state: JobState, jobset: dict[str, Any]) -> None:
        kube.store.delete(kube.kind(JS_API, "JobSet"), NS, "aiperf-demo", {})

    deleted = r"^JobSet aiperf-demo was deleted before it finished$"
    with anyio.fail_after(10), pytest.raises(KubeError, match=deleted):
        await direct.watch_jobset_until_done(api, "demo", NS, on_event)


async def test_watch_of_a_finished_run_returns_at_once(kube: FakeKube, api: KubeApi) -> None:
    add_jobset(kube, "demo", condition("Failed"))
    assert await direct.watch_jobset_until_done(api, "demo", NS) == JobState.FAILED
    assert len(kube.requests) == 1


# -- cancel and delete -------------------------------------------------------------------------

async def test_cancel_suspends_the_jobset_fenced_on_its_uid(kube: FakeKube, api: KubeApi) -> None:
    created = add_jobset(kube, "demo")
    assert await direct.cancel(api, "demo", NS) == JobState.SUSPENDED
    patch = kube.requests_for("PATCH")[0]
    assert (patch.path, patch.content_type, patch.body) == (
        f"{JS_PATH}/aiperf-demo", "application/json-patch+json",
        [{"op": "test", "path": "/metadata/uid", "value": created["metadata"]["uid"]},
         {"op": "add", "path": "/spec/suspend", "value": True}])
    assert kube.get(JS_API, "JobSet", NS, "aiperf-demo")["spec"]["suspend"] is True  # type: ignore[index]
    assert direct.jobset_state(await direct.get_jobset(api, "demo", NS) or {}) == JobState.SUSPENDED
    assert await direct.cancel(api, "demo", NS) == JobState.SUSPENDED  # already: nothing patched
    assert len(kube.requests_for("PATCH")) == 1


async def test_cancel_of_a_finished_or_missing_run(kube: FakeKube, api: KubeApi) -> None:
    add_jobset(kube, "demo", condition("Completed"))
    assert await direct.cancel(api, "demo", NS) == JobState.COMPLETED
    assert kube.requests_for("PATCH") == []
    with pytest.raises(KubeError, match=r"^no run other in namespace bench"):
        await direct.cancel(api, "other", NS)


async def test_cancel_never_suspends_a_same_name_replacement(
        kube: FakeKube, api: KubeApi, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = add_jobset(kube, "demo")
    kube.store.delete(kube.kind(JS_API, "JobSet"), NS, "aiperf-demo", {})
    add_jobset(kube, "demo")  # recreated between our read and our patch

    async def read_stale(api: KubeApi, name: str, namespace: str) -> dict[str, Any]:
        return stale

    monkeypatch.setattr(direct, "get_jobset", read_stale)
    with pytest.raises(KubeError, match=r"^JobSet aiperf-demo was deleted or replaced while cancelling"):
        await direct.cancel(api, "demo", NS)
    assert "suspend" not in kube.get(JS_API, "JobSet", NS, "aiperf-demo")["spec"]  # type: ignore[index]


async def test_delete_removes_the_run_objects_foreground_and_skips_missing_ones(
        kube: FakeKube, api: KubeApi) -> None:
    for obj in run_objects():
        if obj["kind"] != "RoleBinding":
            kube.create(obj)
    uids = {o["kind"]: kube.get(o["apiVersion"], o["kind"], NS, o["metadata"]["name"])["metadata"]["uid"]  # type: ignore[index]
            for o in run_objects() if o["kind"] != "RoleBinding"}
    deleted = await direct.delete(api, "demo", NS)
    assert deleted == ["JobSet/aiperf-demo", "ConfigMap/aiperf-demo-config", "Role/aiperf-demo"]
    requests = kube.requests_for("DELETE")
    assert [r.path for r in requests] == [
        f"{JS_PATH}/aiperf-demo", "/api/v1/namespaces/bench/configmaps/aiperf-demo-config",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/bench/roles/aiperf-demo"]
    assert [r.body for r in requests] == [
        {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground",
         "preconditions": {"uid": uids[kind]}} for kind in ("JobSet", "ConfigMap", "Role")]
    assert [k for k, _ in kube.store.all_objects() if k[1] not in ("namespaces", "customresourcedefinitions")] == []
    assert await direct.delete(api, "demo", NS) == []


async def test_delete_never_removes_a_same_name_replacement(
        kube: FakeKube, api: KubeApi, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = add_jobset(kube, "demo")
    kube.store.delete(kube.kind(JS_API, "JobSet"), NS, "aiperf-demo", {})
    fresh = add_jobset(kube, "demo")  # a new run with the same name
    with pytest.raises(KubeError, match=r"not " + stale["metadata"]["uid"]):
        await direct.delete(api, "demo", NS, uid=stale["metadata"]["uid"])
    assert kube.requests_for("DELETE") == []
    # replaced between the read and the delete: the precondition refuses it (409)
    real_delete = api.delete

    async def replace_then_delete(resource: Any, namespace: str, name: str, **kwargs: Any) -> bool:
        if resource is JOBSETS and name == "aiperf-demo":
            kube.store.delete(kube.kind(JS_API, "JobSet"), NS, "aiperf-demo", {})
            add_jobset(kube, "demo")
        return await real_delete(resource, namespace, name, **kwargs)

    monkeypatch.setattr(api, "delete", replace_then_delete)
    with pytest.raises(KubeError, match=r"^JobSet bench/aiperf-demo was replaced by a same-name one"):
        await direct.delete(api, "demo", NS)
    current = kube.get(JS_API, "JobSet", NS, "aiperf-demo")
    assert current is not None and current["metadata"]["uid"] not in (fresh["metadata"]["uid"], stale["metadata"]["uid"])


@pytest.mark.parametrize("garbage", [b'{"type": "MODIFIED", "obj', b"this is not json\n", b"[1, 2]\n"])
async def test_watch_survives_a_cut_stream_or_a_bad_line(kube: FakeKube, api: KubeApi, garbage: bytes) -> None:
    add_jobset(kube, "demo")
    result: list[JobState] = []

    async def watch() -> None:
        result.append(await direct.watch_jobset_until_done(api, "demo", NS))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            await kube.wait_until(lambda: bool(kube.store.watchers))
            assert kube.cut_watches(garbage) == 1
            await kube.wait_until(lambda: len([r for r in kube.requests if "watch" in r.query]) == 2
                                  and bool(kube.store.watchers))
            kube.set_status(JS_API, "JobSet", NS, "aiperf-demo", condition("Completed"))
    assert result == [JobState.COMPLETED]
    assert [(r.method, "watch" in r.query) for r in kube.requests] == [
        ("GET", False), ("GET", True), ("GET", False), ("GET", True)]  # read again after the cut


async def test_a_watch_that_keeps_breaking_gives_up_with_one_line(kube: FakeKube, api: KubeApi) -> None:
    add_jobset(kube, "demo")
    cuts = 0

    async def cutter() -> None:
        nonlocal cuts
        while True:  # each new watch, once it is open
            await kube.wait_until(lambda: any(not w.cut for w in kube.store.watchers))
            cuts += kube.cut_watches(b"garbage\n")

    errors: list[str] = []
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(cutter)
            try:
                await direct.watch_jobset_until_done(api, "demo", NS)
            except KubeError as exc:
                errors.append(str(exc))
            tg.cancel_scope.cancel()
    assert len(errors) == 1 and errors[0].startswith("watching JobSet aiperf-demo failed 5 times in a row"), errors
    assert cuts == MAX_BROKEN_WATCHES


# -- pods --------------------------------------------------------------------------------------

def add_pod(kube: FakeKube, name: str, job: str, phase: str = "Running", containers: int = 1) -> None:
    kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": {
        "jobset.sigs.k8s.io/jobset-name": "aiperf-demo", "jobset.sigs.k8s.io/replicatedjob-name": job}},
        "spec": {"containers": [{"name": f"c{i}", "image": "x"} for i in range(containers)]}})
    kube.run_pod(NS, name)  # scheduled, with a pod IP, every container running
    if phase == "Failed":
        kube.terminate_pod(NS, name, {"c0": 1})


async def test_pod_logs(kube: FakeKube, api: KubeApi) -> None:
    add_pod(kube, "p", "workers", containers=2)
    kube.set_pod_log(NS, "p", '{"a": 1}\n', container="c1")
    assert await direct.pod_logs(api, "p", NS, container="c1") == '{"a": 1}\n'
    assert await direct.pod_logs(api, "p", NS, container="c1", tail=0) == ""
    assert kube.requests[-1].query == {"container": "c1", "tailLines": "0"}
    with pytest.raises(KubeError, match=r"^reading the log of pod p failed: a container name must be "):
        await direct.pod_logs(api, "p", NS)
    with pytest.raises(KubeError, match=r"^pod q not found in namespace bench$"):
        await direct.pod_logs(api, "q", NS)


async def test_a_run_with_its_curve_secret_is_created_and_deleted_whole(kube: FakeKube, api: KubeApi) -> None:
    from aiperf.comms import CurveKeys
    from aiperf.kube import KubeSettings, build_curve_secret

    secret = build_curve_secret(KubeSettings(name="demo", namespace=NS), CurveKeys.generate())
    created = await direct.create_all(api, [*run_objects(), secret])
    assert [o["kind"] for o in created] == ["Role", "RoleBinding", "ConfigMap", "Secret", "JobSet"]
    deleted = await direct.delete(api, "demo", NS)
    assert "Secret/aiperf-demo-curve" in deleted
    assert kube.get("v1", "Secret", NS, "aiperf-demo-curve") is None



async def test_watch_reads_again_after_a_504_error_event(kube: FakeKube, api: KubeApi) -> None:
    # Issue 23, item 9: a lagging apiserver ends a watch with ERROR 504, not only 410: read again.
    add_jobset(kube, "demo")

    async def fail_then_suspend() -> None:
        await kube.wait_until(lambda: len(kube.store.watchers) == 1)
        assert kube.fail_watches() == 1
        await kube.wait_until(lambda: len(kube.requests_for("GET")) >= 3)  # the read again
        jobset = kube.get(JS_API, "JobSet", NS, "aiperf-demo")
        assert jobset is not None
        kube.update(dict(jobset, spec={**jobset["spec"], "suspend": True}))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(fail_then_suspend)
            state = await direct.watch_jobset_until_done(api, "demo", NS, lambda state, jobset: None)
    assert state == JobState.SUSPENDED
    assert [(r.method, "watch" in r.query) for r in kube.requests[:3]] == [("GET", False), ("GET", True),
                                                                          ("GET", False)]
