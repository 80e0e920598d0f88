"""Issue 9, testing point 8: with `rbac=True` the fake authenticates bearer tokens and
authorizes every request against the Roles and bindings in the store, with the apiserver's
401/403 answers. Driven by kubernetes_asyncio over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from _widgets import status_of
from kubernetes_asyncio.client import ApiClient, CoreV1Api, RbacAuthorizationV1Api
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config import new_client_from_config

from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio


@pytest.fixture
async def secured() -> AsyncIterator[FakeKube]:
    async with FakeKube(namespaces=["bench"], rbac=True) as fake:
        yield fake


async def client(kube: FakeKube, token: str | None) -> ApiClient:
    path = kube.write_kubeconfig(f"{kube.kubeconfig_path}-{token}", token=token)
    if token is None:  # write_kubeconfig falls back to the admin token
        path.write_text(path.read_text().replace(kube.admin_token, ""))
    return await new_client_from_config(str(path), persist_config=False)


async def test_no_token_is_401_and_no_binding_is_403_until_a_role_allows_it(secured: FakeKube) -> None:
    async with await client(secured, None) as anonymous:
        with pytest.raises(ApiException) as exc:
            await CoreV1Api(anonymous).list_namespaced_config_map("bench")
        assert exc.value.status == 401
    token = secured.token_for("bench", "runner")
    async with await client(secured, token) as runner, await client(secured, secured.admin_token) as admin:
        core = CoreV1Api(runner)
        with pytest.raises(ApiException) as exc:
            await core.list_namespaced_config_map("bench")
        assert (exc.value.status, status_of(exc)["message"]) == (403, (
            'configmaps is forbidden: User "system:serviceaccount:bench:runner" cannot list resource '
            '"configmaps" in API group "" in the namespace "bench"'))
        rbac = RbacAuthorizationV1Api(admin)
        await rbac.create_namespaced_role("bench", {"metadata": {"name": "r"}, "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]},
            {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}]})
        await rbac.create_namespaced_role_binding("bench", {"metadata": {"name": "r"}, "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}, "subjects": [
            {"kind": "ServiceAccount", "name": "runner", "namespace": "bench"}]})
        assert (await core.list_namespaced_config_map("bench")).items == []
        with pytest.raises(ApiException) as exc:  # list does not grant create
            await core.create_namespaced_config_map("bench", {"metadata": {"name": "c"}})
        assert exc.value.status == 403
        with pytest.raises(ApiException) as exc:  # a Role binds only in its namespace
            await core.list_namespaced_config_map("default")
        assert exc.value.status == 403
        await CoreV1Api(admin).create_namespaced_pod("bench", {"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "c", "image": "img:1"}]}})
        assert await core.read_namespaced_pod_log("p", "bench") == ""  # pods/log, not pods
        with pytest.raises(ApiException) as exc:
            await core.read_namespaced_pod("p", "bench")
        assert exc.value.status == 403


async def test_block_owner_deletion_needs_update_on_the_owners_finalizers(secured: FakeKube) -> None:
    # Issue 23, item 3: OpenShift's OwnerReferencesPermissionEnforcement.
    token = secured.token_for("bench", "runner")
    async with await client(secured, token) as runner, await client(secured, secured.admin_token) as admin:
        owner = await CoreV1Api(admin).create_namespaced_config_map("bench", {"metadata": {"name": "owner"}})
        rbac = RbacAuthorizationV1Api(admin)
        await rbac.create_namespaced_role("bench", {"metadata": {"name": "r"}, "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]})
        await rbac.create_namespaced_role_binding("bench", {"metadata": {"name": "r"}, "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}, "subjects": [
            {"kind": "ServiceAccount", "name": "runner", "namespace": "bench"}]})
        ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid,
               "controller": True}
        core = CoreV1Api(runner)
        await core.create_namespaced_config_map("bench", {"metadata": {"name": "plain", "ownerReferences": [ref]}})
        blocking = {"metadata": {"name": "blocking", "ownerReferences": [{**ref, "blockOwnerDeletion": True}]}}
        with pytest.raises(ApiException) as exc:
            await core.create_namespaced_config_map("bench", blocking)
        assert (exc.value.status, status_of(exc)["message"]) == (403, (
            'configmaps "blocking" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a '
            "resource you can't set finalizers on: , <nil>"))
        await rbac.create_namespaced_role("bench", {"metadata": {"name": "f"}, "rules": [
            {"apiGroups": [""], "resources": ["configmaps/finalizers"], "verbs": ["update"],
             "resourceNames": ["owner"]}]})
        await rbac.create_namespaced_role_binding("bench", {"metadata": {"name": "f"}, "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "f"}, "subjects": [
            {"kind": "ServiceAccount", "name": "runner", "namespace": "bench"}]})
        await core.create_namespaced_config_map("bench", blocking)
