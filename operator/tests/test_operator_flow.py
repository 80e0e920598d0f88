"""The operator end to end with real kopf against the fake API server: a run's objects and
their owner references, the phase following the JobSet, an invalid spec, cancel, timeout,
the run's CURVE key Secret, delete, same-name recreation while the old JobSet terminates, and a restart mid-run."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from _harness import NS, condition, cr, job, jobset, operator, phase, set_jobset_status

from aiperf.comms import CurveKeys
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio

OWNED = [("v1", "ServiceAccount", "aiperf-run"), ("rbac.authorization.k8s.io/v1", "Role", "aiperf-run"),
         ("rbac.authorization.k8s.io/v1", "RoleBinding", "aiperf-run"), ("v1", "Secret", "aiperf-run-curve"),
         ("v1", "ConfigMap", "aiperf-run-config"),
         ("jobset.x-k8s.io/v1alpha2", "JobSet", "aiperf-run")]


async def test_create_makes_owned_objects_and_follows_the_jobset_to_completed(kube: FakeKube) -> None:
    async with operator(kube) as metrics:
        created = kube.create(job())
        uid = created["metadata"]["uid"]
        await kube.wait_until(lambda: phase(kube) == "Initializing", timeout=20)
        for api_version, kind, name in OWNED:
            obj = kube.get(api_version, kind, NS, name)
            assert obj is not None, f"{kind} {name} missing"
            (ref,) = obj["metadata"]["ownerReferences"]
            assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == ("AIPerfJob", "run", uid, True)
        status = cr(kube)["status"]
        assert condition(kube, "ConfigValid")["status"] == "True"
        assert condition(kube, "ResourcesCreated")["status"] == "True"
        assert status["observedGeneration"] == 1 and status["startTime"] and status["runEpoch"].isdigit()

        set_jobset_status(kube, "run")  # every pod ready
        await kube.wait_until(lambda: phase(kube) == "Running")
        assert condition(kube, "WorkersReady")["status"] == "True"
        set_jobset_status(kube, "run", condition="Completed")
        await kube.wait_until(lambda: phase(kube) == "Completed")
        assert condition(kube, "Succeeded")["status"] == "True" and cr(kube)["status"]["completionTime"]
    assert metrics.value("runs", "Completed") == 1 and metrics.value("reconciles", "create") == 1


async def test_the_runs_curve_secret_holds_a_fresh_key_pair_found_nowhere_else(kube: FakeKube,
                                                                               tmp_path: Path) -> None:
    # Without the keys every pod of the run exits 2 at start ("curve key file ... not found").
    async with operator(kube):
        kube.create(job())
        kube.create(job("other"))
        await kube.wait_until(lambda: phase(kube) == "Initializing" and phase(kube, "other") == "Initializing",
                              timeout=20)
    secret = kube.get("v1", "Secret", NS, "aiperf-run-curve")
    assert secret is not None and sorted(secret["data"]) == ["client.key", "server.key"]
    for name, value in secret["data"].items():
        (tmp_path / name).write_bytes(base64.b64decode(value))
    keys = CurveKeys.load(tmp_path)  # both files, each with its public and secret key
    config_map = kube.get("v1", "ConfigMap", NS, "aiperf-run-config")
    assert json.loads(config_map["data"]["run_config.json"])["comms"]["curve_keys_dir"] == "/curve"
    elsewhere = json.dumps([config_map, jobset(kube), cr(kube)])
    for key in (keys.server_secret, keys.client_secret, keys.server_public, keys.client_public):
        assert key.decode() not in elsewhere
    other = kube.get("v1", "Secret", NS, "aiperf-other-curve")
    assert other is not None and other["data"] != secret["data"]  # fresh per run
    pod = jobset(kube)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert {"name": "curve", "secret": {"secretName": "aiperf-run-curve", "defaultMode": 0o444}} in pod["volumes"]


async def test_an_invalid_spec_fails_with_config_valid_false_and_creates_nothing(kube: FakeKube) -> None:
    # Valid for the CRD, refused by the deployment settings: a name too long for the pods the
    # JobSet would create.
    async with operator(kube) as metrics:
        kube.create(job("a" * 50))
        await kube.wait_until(lambda: phase(kube, "a" * 50) == "Failed", timeout=20)
        cond = condition(kube, "ConfigValid", "a" * 50)
        assert cond["status"] == "False" and cond["reason"] == "InvalidSpec"
        assert "too long" in cond["message"] and "\n" not in cond["message"]
        assert jobset(kube, "a" * 50) is None
        assert kube.get("v1", "ConfigMap", NS, f"aiperf-{'a' * 50}-config") is None
    assert metrics.value("errors", "create") == 1 and metrics.value("runs", "Failed") == 1


async def test_cancel_mid_run_suspends_the_jobset_and_ends_cancelled(kube: FakeKube) -> None:
    async with operator(kube):
        kube.create(job())
        await kube.wait_until(lambda: phase(kube) == "Initializing", timeout=20)
        set_jobset_status(kube, "run")
        await kube.wait_until(lambda: phase(kube) == "Running")
        live = cr(kube)
        kube.update({**live, "spec": {**live["spec"], "cancel": True}})
        await kube.wait_until(lambda: phase(kube) == "Cancelled")
        js = jobset(kube)
        assert js is not None and js["spec"]["suspend"] is True
        assert condition(kube, "Cancelled")["status"] == "True"
        await kube.wait_until(lambda: cr(kube)["status"].get("observedGeneration") == cr(kube)["metadata"]["generation"])
        assert cr(kube)["metadata"]["generation"] == 2


async def test_timeout_fails_the_run_and_deletes_its_jobset(kube: FakeKube) -> None:
    async with operator(kube):
        kube.create(job(timeoutSeconds=1))
        await kube.wait_until(lambda: phase(kube) == "Failed", timeout=20)
        cond = condition(kube, "TimedOut")
        assert cond["status"] == "True" and "timeoutSeconds 1" in cond["message"]
        await kube.wait_until(lambda: jobset(kube) is None)


async def test_raising_timeout_seconds_is_acknowledged_and_keeps_the_run(kube: FakeKube) -> None:
    async with operator(kube):
        kube.create(job(timeoutSeconds=3600))
        await kube.wait_until(lambda: phase(kube) == "Initializing", timeout=20)
        live = cr(kube)
        kube.update({**live, "spec": {**live["spec"], "timeoutSeconds": 7200}})
        await kube.wait_until(lambda: cr(kube)["status"].get("observedGeneration") == 2)
        assert phase(kube) == "Initializing"


async def test_deleting_the_cr_deletes_what_it_owns(kube: FakeKube) -> None:
    async with operator(kube):
        kube.create(job())
        await kube.wait_until(lambda: phase(kube) == "Initializing", timeout=20)
        await _delete_cr(kube)
        await kube.wait_until(lambda: not cr(kube) and all(
            kube.get(v, k, NS, n) is None for v, k, n in OWNED))


async def test_recreation_waits_for_the_old_jobset_and_is_never_adopted_by_it(kube: FakeKube) -> None:
    async with operator(kube):
        old_uid = kube.create(job())["metadata"]["uid"]
        await kube.wait_until(lambda: phase(kube) == "Initializing", timeout=20)
        old = jobset(kube)
        assert old is not None
        # Something (e.g. the JobSet controller) keeps the old JobSet terminating for a while.
        kube.update({**old, "metadata": {**old["metadata"], "finalizers": ["example.com/hold"]}})
        await _delete_cr(kube)
        await kube.wait_until(lambda: not cr(kube) and (jobset(kube) or {}).get("metadata", {}).get(
            "deletionTimestamp") is not None)

        new_uid = kube.create(job())["metadata"]["uid"]
        await kube.wait_until(lambda: condition(kube, "ResourcesCreated").get("reason") == "WaitingForPreviousRun")
        assert phase(kube) == "Pending"
        held = jobset(kube)
        assert held is not None and held["metadata"]["ownerReferences"][0]["uid"] == old_uid
        assert old_uid in condition(kube, "ResourcesCreated")["message"]

        kube.update({**held, "metadata": {**held["metadata"], "finalizers": []}})  # the old one goes
        await kube.wait_until(lambda: phase(kube) == "Initializing", timeout=20)
        new = jobset(kube)
        assert new is not None and new["metadata"]["ownerReferences"][0]["uid"] == new_uid


async def test_a_foreign_object_under_the_name_fails_the_run(kube: FakeKube) -> None:
    kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "aiperf-run-config", "namespace": NS},
                 "data": {"x": "y"}})
    async with operator(kube):
        kube.create(job())
        await kube.wait_until(lambda: phase(kube) == "Failed", timeout=20)
        cond = condition(kube, "ResourcesCreated")
        assert cond["reason"] == "NameConflict" and "no AIPerfJob owns it" in cond["message"]
        assert jobset(kube) is None
    assert kube.get("v1", "ConfigMap", NS, "aiperf-run-config")["data"] == {"x": "y"}  # untouched


async def test_a_restarted_operator_resumes_a_running_run(kube: FakeKube) -> None:
    async with operator(kube):
        kube.create(job())
        await kube.wait_until(lambda: phase(kube) == "Initializing", timeout=20)
        set_jobset_status(kube, "run")
        await kube.wait_until(lambda: phase(kube) == "Running")
    set_jobset_status(kube, "run", condition="Completed")  # finishes while no operator runs
    assert phase(kube) == "Running"
    creates = len([r for r in kube.requests_for("POST", "/apis/jobset.x-k8s.io")])
    async with operator(kube) as metrics:
        await kube.wait_until(lambda: phase(kube) == "Completed", timeout=20)
    assert len(kube.requests_for("POST", "/apis/jobset.x-k8s.io")) == creates  # nothing created again
    assert metrics.value("reconciles", "create") == 0


async def _delete_cr(kube: FakeKube) -> None:
    from kubernetes_asyncio.client import CustomObjectsApi
    from kubernetes_asyncio.config import new_client_from_config

    async with await new_client_from_config(kube.kubeconfig_path, persist_config=False) as client:
        await CustomObjectsApi(client).delete_namespaced_custom_object("aiperf.nvidia.com", "v1alpha1", NS,
                                                                       "aiperfjobs", "run")


async def test_an_object_this_cr_already_owns_is_adopted_not_replaced(kube: FakeKube) -> None:
    # As after an operator crash in the middle of creating the run's objects.
    uid = kube.create(job())["metadata"]["uid"]
    owner = {"apiVersion": "aiperf.nvidia.com/v1alpha1", "kind": "AIPerfJob", "name": "run", "uid": uid,
             "controller": True, "blockOwnerDeletion": True}
    kube.create({"apiVersion": "v1", "kind": "ConfigMap", "data": {"run_config.json": "{}"}, "metadata": {
        "name": "aiperf-run-config", "namespace": NS, "labels": {"example.com/marker": "first"},
        "ownerReferences": [owner]}})
    async with operator(kube):
        await kube.wait_until(lambda: phase(kube) == "Initializing", timeout=20)
    config_map = kube.get("v1", "ConfigMap", NS, "aiperf-run-config")
    assert config_map is not None and config_map["metadata"]["labels"]["example.com/marker"] == "first"
    assert jobset(kube) is not None and condition(kube, "ResourcesCreated")["status"] == "True"
