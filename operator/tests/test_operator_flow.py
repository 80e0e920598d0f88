"""The operator end to end with real kopf against the fake API server: a run's objects and
their owner references, the phase following the JobSet, an invalid spec, cancel, timeout,
delete, same-name recreation while the old JobSet terminates, and a restart mid-run."""

from __future__ import annotations

import pytest
from _harness import NS, condition, cr, job, jobset, operator, phase, set_jobset_status

from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio

OWNED = [("v1", "ServiceAccount", "aiperf-run"), ("rbac.authorization.k8s.io/v1", "Role", "aiperf-run"),
         ("rbac.authorization.k8s.io/v1", "RoleBinding", "aiperf-run"), ("v1", "ConfigMap", "aiperf-run-config"),
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
