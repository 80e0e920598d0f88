"""A fake Kubernetes API server for tests: real HTTP on 127.0.0.1, real API semantics.

    async with FakeKube(namespaces=["bench"]) as kube:
        api = await new_client_from_config(kube.kubeconfig_path, persist_config=False)
        ...
        assert kube.requests_for("PATCH")[0].content_type == "application/json-patch+json"

It is strict where our code depends on it, and tested against kubernetes_asyncio and kopf
(libs/testing/tests/test_fake_kube*.py). What it honours:

- Kinds: the built-ins of `fake_kube_kinds.BUILTIN_KINDS`, and every served version of each
  CustomResourceDefinition in the store (created through the API or `install_crd`; a JobSet CRD
  is installed unless `jobset=False`). A resource with no CRD is 404. Discovery (`/api`,
  `/apis`, `/apis/G`, `/apis/G/V`, aggregated `apidiscovery.k8s.io/v2`) follows the CRDs.
- Writes (`fake_kube_store`): uid, resourceVersion, generation, creationTimestamp; 409
  AlreadyExists (also while a same-name object is still being deleted), stale updates, failed
  delete preconditions; the body against the URL (400); names, labels, annotations, finalizers,
  owner references (422); server-side defaults of Pods, Services, Jobs, Secrets, Namespaces;
  immutable Pod and Job fields; empty metadata maps dropped; `dryRun=All` persists nothing;
  custom resources pruned, defaulted and validated against the CRD schema and its CEL rules
  (`fake_kube_schema`), unknown fields as `Warning` headers or, with `fieldValidation=Strict`, 400.
- PATCH: JSON Patch with `test` (a `null` test of a missing path passes), merge patch,
  strategic merge patch on built-in kinds with patch merge keys and directives (`fake_kube_smp`).
- Deletion and garbage collection (`fake_kube_gc`): deletionTimestamp and finalizers,
  Foreground (`foregroundDeletion`, `blockOwnerDeletion`), Background, Orphan, a dependent with
  another live owner survives, graceful pod deletion, Terminating namespaces, CRD cleanup. The
  collector runs asynchronously after each write (`gc="auto"`), or when the test calls
  `collect_garbage()` (`gc="manual"`).
- LIST and WATCH (`fake_kube_http`) with label/field selectors; `limit`/`continue` pages (410
  on an expired token); WATCH from a resourceVersion over a bounded history (410 when older:
  `history_limit`, `compact()`), selector transitions as ADDED/DELETED, BOOKMARKs when allowed
  (`send_bookmarks()` and every `bookmark_interval`), `sendInitialEvents`; `fail_watches()` ends
  every watch with an ERROR event of another code (504 by default).
- Subresources: status, scale, pods/log, pods/proxy and services/proxy (`fake_kube_pods`; `fake_kube_proxy.forward_to`
  relays to a real server, WebSocket upgrades included), namespaces/finalize, pods/binding,
  serviceaccounts/token. events.k8s.io/v1 Events share storage with core/v1 ones.
- JobSet's defaulting and validating webhooks (`fake_kube_jobset`: the 63-character Job and pod
  name rules, Indexed completion mode, immutable replicated jobs); `add_webhook` for others.
- JobSet TTL when the test says (`expire_jobsets()`), or on the JobSet controller's timer with
  `jobset_ttl="auto"`: every finished JobSet whose `ttlSecondsAfterFinished` has passed since
  its Completed/Failed condition's `lastTransitionTime` (real time) is deleted, Foreground.
- Kueue (`kueue=True`, `fake_kube_kueue`): a JobSet labelled `kueue.x-k8s.io/queue-name` is
  created suspended; `kueue_admit` plays the admission that unsuspends it.
- Optional authentication and RBAC (`rbac=True`, `fake_kube_rbac`): 401 without a known bearer
  token, 403 with the real Status text when no Role/ClusterRole binding allows the request; and
  then OpenShift's `OwnerReferencesPermissionEnforcement`: `blockOwnerDeletion: true` needs
  `update` on the owner's `finalizers` (creates and PUTs; PATCH is not checked).
- Errors are `Status` objects with the real reason, code and message texts; `requests` records
  every request (method, path, query, content type, body).
- kopf runs against it for real with `fake_kube_kopf.KopfOnFakeKube`; `wait_until` waits on writes.

What it does not model (one line each; each module says more):

- admission webhooks other than JobSet's (`fake_kube_jobset`) and those a test adds (`add_webhook`);
- admission plugins besides the defaults above and, with `jobs=True`, PodSecurity enforce,
  ServiceAccount existence and ResourceQuota on pods (no LimitRanger, token volume, quota scopes);
- OpenAPI validation of built-in kinds beyond the fields above (Strict only for custom resources);
- server-side apply and managedFields;
- CRD conversion webhooks (versions convert by rewriting apiVersion only);
- consistent snapshots for list pages (a later page shows later writes);
- `resourceVersionMatch` other than NotOlderThan, and the watch cache's resourceVersion rules;
- CEL's Kubernetes extension libraries, cost limits, ratcheting and `optionalOldSelf`;
- aggregated ClusterRoles, RBAC escalation checks, impersonation, TokenRequest tokens for RBAC;
- pod controllers unless `jobs=True` (`fake_kube_jobs`: Jobs and pods through admission,
  `FailedCreate` Events); otherwise a JobSet or Job creates no pods (the test plays them);
- node, scheduler and kubelet beyond `run_pod`, `terminate_pod`, `finish_pod`, `pods.*` helpers;
- exec, attach and port-forward;
- field selectors other than metadata.name and metadata.namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
from aiohttp import web

from aiperf.testing.fake_kube_api import ApiError, KindInfo, Obj, WriteOptions
from aiperf.testing.fake_kube_gc import GarbageCollector
from aiperf.testing.fake_kube_http import (
    CUT,
    attributes,
    delete_options,
    escape,
    list_page,
    object_body,
    selector_of,
    serve_watch,
)
from aiperf.testing.fake_kube_http import json_response as _json
from aiperf.testing.fake_kube_jobs import JobLayer, JobSetTtl, PodAdmission
from aiperf.testing.fake_kube_jobset import JobSetWebhooks
from aiperf.testing.fake_kube_kinds import CRDS, JOBSET_CRD, NAMESPACES, PODS
from aiperf.testing.fake_kube_kueue import KueueWebhook, admitted
from aiperf.testing.fake_kube_pods import PodRuntime, ProxyHandler
from aiperf.testing.fake_kube_rbac import ADMIN, Authenticator, Authorizer, User
from aiperf.testing.fake_kube_store import Store, Webhook, now_rfc3339, present
from aiperf.testing.fake_kube_tls import TlsFiles

__all__ = ["ApiError", "FakeKube", "KindInfo", "ProxyHandler", "RecordedRequest", "User"]

JOBSET_CRD_API = "jobset.x-k8s.io/v1alpha2"
_AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def _not_json(constant: str) -> Any:
    """NaN, Infinity, -Infinity: Python's json reads them, Go's (the API server's) refuses them."""
    raise ValueError(f"{constant} is not JSON")


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it: `path` is URL-decoded, `body` parsed when JSON."""

    method: str
    path: str
    query: dict[str, str]
    content_type: str | None
    body: Any


@dataclass(frozen=True)
class _Target:
    """What a resource URL names."""

    info: KindInfo
    namespace: str | None  # None: all namespaces (a list or watch on the cluster-wide path)
    name: str | None
    subresource: str | None
    subpath: str


class FakeKube:
    """The fake API server; an async context manager that serves while entered.

    `namespaces` exist from the start; `context`/`default_namespace` shape the kubeconfig
    written to `kubeconfig_path` (server `url`; with `rbac`, the admin token). `jobset`: install
    the JobSet CRD and JobSet's admission webhooks (`fake_kube_jobset`). `kueue`: Kueue's JobSet
    webhook (`fake_kube_kueue`: a JobSet labelled with a queue is created suspended). `jobs`: the
    JobSet and Job controllers create Jobs and pods through admission, with the PodSecurity,
    ServiceAccount and ResourceQuota plugins (`fake_kube_jobs`); `pod_admission` alone: those
    plugins without the controllers (a harness that creates the pods itself). `gc`: "auto" (a background task finishes deletions after each write) or
    "manual" (only `collect_garbage()` does). `jobset_ttl`: "manual" (only `expire_jobsets()`
    deletes finished JobSets past their `ttlSecondsAfterFinished`) or "auto" (the JobSet
    controller's timer: the collector's loop also wakes at each TTL deadline; needs gc "auto").
    `history_limit`: watch events kept.
    `bookmark_interval`: seconds between BOOKMARKs on watches that allow them. `host`: the
    address to listen on (a podman network's gateway lets that network's containers reach it).
    `tls`: serve https with these files (`fake_kube_tls.make_tls_files`); the kubeconfig then
    names the CA.
    """

    def __init__(self, *, namespaces: Iterable[str] = (), context: str = "fake", host: str = "127.0.0.1",
                 tls: TlsFiles | None = None,
                 default_namespace: str | None = None, shutdown_timeout: float = 2.0, jobset: bool = True,
                 rbac: bool = False, kueue: bool = False, jobs: bool = False, pod_admission: bool = False,
                 jobset_ttl: str = "manual", gc: str = "auto", history_limit: int = 10_000,
                 bookmark_interval: float = 60.0) -> None:
        if gc not in ("auto", "manual"):
            raise ValueError(f"gc must be 'auto' or 'manual', not {gc!r}")
        if jobset_ttl not in ("auto", "manual") or (jobset_ttl == "auto" and gc != "auto"):
            raise ValueError(f"jobset_ttl must be 'manual', or 'auto' with gc 'auto', not {jobset_ttl!r}")
        self._ttl_mode = jobset_ttl
        self.store = Store(history_limit=history_limit)
        self.gc = GarbageCollector(self.store)
        self.pods = PodRuntime(self.store)
        self.requests: list[RecordedRequest] = []
        self.rbac = rbac
        self.authenticator = Authenticator(self.store)
        self.authorizer = Authorizer(self.store)
        self.admin_token = "admin-" + uuid.uuid4().hex
        self.authenticator.add_token(self.admin_token, ADMIN)
        self._gc_mode, self._bookmark_interval = gc, bookmark_interval
        self._wake, self._changed = asyncio.Event(), asyncio.Event()
        self._gc_task: asyncio.Task[None] | None = None
        self._context, self._default_namespace = context, default_namespace
        self._host, self.tls = host, tls
        self._shutdown_timeout = shutdown_timeout
        self._runner: web.AppRunner | None = None
        self._tmp: Path | None = None
        self.url = ""
        self.kubeconfig_path = ""
        if jobset:
            self.install_crd(JOBSET_CRD)
            self.store.webhooks.append(JobSetWebhooks())
        if kueue:
            self.store.webhooks.append(KueueWebhook())
        self.job_layer = JobLayer(self.store) if jobs else None
        self.jobset_ttl = JobSetTtl(self.store)
        if jobs or pod_admission:
            self.store.webhooks.append(PodAdmission(self.store))
        for ns in namespaces:
            self.add_namespace(ns)

    # -- lifecycle -----------------------------------------------------------------------------

    async def __aenter__(self) -> FakeKube:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=self._shutdown_timeout)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, 0,
                           ssl_context=self.tls.server_context() if self.tls else None)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"{'https' if self.tls else 'http'}://{host}:{port}"
        self._tmp = Path(tempfile.mkdtemp(prefix="fake-kube-"))
        self.kubeconfig_path = str(self.write_kubeconfig(self._tmp / "kubeconfig"))
        self._wake, self._changed = asyncio.Event(), asyncio.Event()
        self.store.changed = self._on_change
        if self._gc_mode == "auto":
            self._gc_task = asyncio.get_running_loop().create_task(self._collect_forever())
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.pods.closing = True
        self.pods.notify()
        for watcher in list(self.store.watchers):
            watcher.queue.put_nowait(None)
        if self._gc_task is not None:
            self._gc_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._gc_task
            self._gc_task = None
        self.store.changed = lambda: None
        if self._runner is not None:
            server = self._runner.server
            clients = [h.transport for h in (server.connections if server is not None else []) if h.transport]
            await self._runner.cleanup()
            self._runner = None
            # A TLS connection whose client vanished (a pod torn down) waits out its close_notify
            # (30 s) after `cleanup`; end it now, or its socket outlives the event loop.
            for transport in clients:
                transport.abort()
            await asyncio.sleep(0)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def _on_change(self) -> None:
        self._wake.set()
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(self, predicate: Callable[[], object], timeout: float = 10.0) -> None:
        """Return once `predicate()` is true, checking after every committed change; raise
        TimeoutError after `timeout` seconds (real time)."""
        with anyio.fail_after(timeout):
            while not predicate():
                changed = self._changed
                with contextlib.suppress(TimeoutError):  # time-based transitions: recheck now and then
                    await asyncio.wait_for(changed.wait(), 0.5)

    async def _collect_forever(self) -> None:
        """The garbage collector's loop: run after every write and at pod grace deadlines (and,
        with `jobset_ttl="auto"`, JobSet TTL deadlines)."""
        while True:
            self._wake.clear()
            if self._ttl_mode == "auto":
                self.jobset_ttl.run()
            self.gc.run()
            if self.job_layer is not None:
                self.job_layer.run()
            deadlines = [d for d in (self.gc.seconds_to_next_deadline(),
                                     self.jobset_ttl.seconds_to_next_deadline() if self._ttl_mode == "auto" else None)
                         if d is not None]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), min(deadlines) if deadlines else None)

    def write_kubeconfig(self, path: Path | str, *, context: str | None = None,
                         namespace: str | None = None, token: str | None = None) -> Path:
        """Write a kubeconfig for this server (context `context`, default namespace `namespace`,
        bearer `token`: by default the admin token when `rbac` is on) to `path` and return it.
        Only valid while the server is serving."""
        context = context or self._context
        ctx: dict[str, str] = {"cluster": "fake-kube", "user": "fake-kube"}
        if namespace or self._default_namespace:
            ctx["namespace"] = namespace or self._default_namespace or ""
        token = token or (self.admin_token if self.rbac else None)
        config = {
            "apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": "fake-kube", "cluster": {
                "server": self.url, **({"certificate-authority": str(self.tls.ca)} if self.tls else {})}}],
            "users": [{"name": "fake-kube", "user": {"token": token} if token else {}}],
            "contexts": [{"name": context, "context": ctx}],
            "current-context": context,
        }
        path = Path(path)
        path.write_text(json.dumps(config, indent=2))
        return path

    # -- test helpers --------------------------------------------------------------------------

    def install_crd(self, crd: Obj) -> Obj:
        """Create a CustomResourceDefinition (as `POST .../customresourcedefinitions` would): its
        kinds are served at once."""
        return self.store.create(CRDS, "", crd)

    def register_kind(self, api_version: str, plural: str, kind: str, *, namespaced: bool = True,
                      has_status: bool = True) -> KindInfo:
        """Serve a custom resource with an open schema (a CRD that preserves unknown fields)."""
        group, _, version = api_version.rpartition("/")
        open_object = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        self.install_crd({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                          "metadata": {"name": f"{plural}.{group}"},
                          "spec": {"group": group, "scope": "Namespaced" if namespaced else "Cluster",
                                   "names": {"plural": plural, "kind": kind},
                                   "versions": [{"name": version, "served": True, "storage": True,
                                                 "subresources": {"status": {}} if has_status else {},
                                                 "schema": {"openAPIV3Schema": open_object}}]}})
        return self.kind(api_version, kind)

    def delete_crd(self, name: str) -> None:
        """Delete CRD `name` and its custom resources now (ignoring their finalizers)."""
        for key, _ in self.store.all_objects():
            crd = self.store.find(CRDS, "", name)
            if crd and key[:2] == (crd["spec"]["group"], crd["spec"]["names"]["plural"]):
                self.store.system_remove(key)
        self.store.system_remove(("apiextensions.k8s.io", "customresourcedefinitions", "", name))

    def add_webhook(self, webhook: Webhook) -> None:
        """Serve admission webhook `webhook` (mutating and validating, `fake_kube_store.Webhook`)
        from now on, after those already served (a policy engine's, a test's)."""
        self.store.webhooks.append(webhook)

    def add_namespace(self, name: str) -> Obj:
        """Create namespace `name` (as `POST /api/v1/namespaces` would)."""
        return self.store.create(NAMESPACES, "", {"metadata": {"name": name}})

    def kind(self, api_version: str, kind_or_plural: str) -> KindInfo:
        """The KindInfo served for `api_version` with this kind or plural; KeyError if none."""
        info = self.store.kinds.by_kind(api_version, kind_or_plural)
        if info is None:
            raise KeyError(f"{kind_or_plural} is not served at {api_version} (no CRD?)")
        return info

    def create(self, obj: Obj) -> Obj:
        """Create `obj` through admission (its apiVersion, kind and metadata.namespace say where)."""
        info = self.kind(obj["apiVersion"], obj["kind"])
        return present(info, self.store.create(info, obj["metadata"].get("namespace", ""), obj))

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> Obj | None:
        """The stored object, or None."""
        info = self.kind(api_version, kind)
        found = self.store.find(info, namespace, name)
        return present(info, found) if found is not None else None

    def set_status(self, api_version: str, kind: str, namespace: str, name: str, status: Obj) -> Obj:
        """Replace an object's status (as a controller would), emitting MODIFIED."""
        info = self.kind(api_version, kind)
        current = present(info, self.store.get(info, namespace, name))
        current["status"] = status
        return present(info, self.store.replace(info, namespace, name, current, status=True))

    def update(self, obj: Obj) -> Obj:
        """Replace `obj` unconditionally (finalizer removal, spec edits), emitting MODIFIED."""
        info = self.kind(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        current = self.store.get(info, meta.get("namespace", ""), meta["name"])
        body = {**obj, "metadata": {**meta, "resourceVersion": current["metadata"]["resourceVersion"]}}
        return present(info, self.store.replace(info, meta.get("namespace", ""), meta["name"], body,
                                                status=False))

    def kueue_admit(self, namespace: str, name: str, node_selector: dict[str, str] | None = None) -> Obj:
        """Play Kueue admitting queued JobSet `namespace/name`: unsuspend it (an update through
        admission), with the flavor's `node_selector` in its pod templates."""
        jobset = self.get(JOBSET_CRD_API, "JobSet", namespace, name)
        if jobset is None:
            raise KeyError(f"no JobSet {namespace}/{name}")
        return self.update(admitted(jobset, node_selector))

    def expire_jobsets(self) -> int:
        """Play the JobSet controller's TTL now (`fake_kube_jobs.JobSetTtl`): delete every
        finished JobSet whose `ttlSecondsAfterFinished` has passed; how many."""
        return self.jobset_ttl.run()

    def run_pod(self, namespace: str, name: str, *, ip: str | None = None) -> Obj:
        """Play scheduler and kubelet: the pod runs (nodeName, podIP, containers running)."""
        return self.pods.run(namespace, name, ip=ip)

    def terminate_pod(self, namespace: str, name: str, exit_codes: dict[str, int] | None = None) -> Obj:
        """Play the kubelet: every container ends (Succeeded, or Failed on a non-zero exit code)."""
        return self.pods.terminate(namespace, name, exit_codes)

    def end_container(self, namespace: str, name: str, container: str, exit_code: int = 0) -> Obj:
        """Play the kubelet: one container of a running pod exits with `exit_code` (the pod keeps
        running while others do); pods/proxy to a port of that container is refused from then."""
        reason = "Completed" if exit_code == 0 else "Error"
        return self.pods.set_container_state(namespace, name, container, {"terminated": {
            "exitCode": exit_code, "reason": reason, "finishedAt": now_rfc3339()}})

    def finish_pod(self, namespace: str, name: str) -> bool:
        """Play the kubelet after a graceful delete: the pod's containers stopped, it goes."""
        return self.gc.finish_pod(self.store.key(PODS, namespace, name))

    def set_pod_log(self, namespace: str, pod: str, text: str, container: str | None = None) -> None:
        """What `GET .../pods/POD/log` returns for `container` (None: any container)."""
        self.pods.set_log(namespace, pod, text, container)

    def append_pod_log(self, namespace: str, pod: str, text: str, container: str | None = None) -> None:
        """Append to a pod's log (`follow=true` readers receive it)."""
        self.pods.append_log(namespace, pod, text, container)

    def register_proxy(self, namespace: str, pod: str, port: int, handler: ProxyHandler,
                       container: str | None = None) -> None:
        """A process in the pod listens on `port` (in `container`, else the one declaring the
        port, else any); `.../pods/POD:PORT/proxy/...` reaches `handler` while it runs."""
        self.pods.register_proxy(namespace, pod, port, handler, container)

    def token_for(self, namespace: str, service_account: str) -> str:
        """A bearer token that authenticates as ServiceAccount `namespace/service_account`."""
        token = f"sa-{namespace}-{service_account}-{uuid.uuid4().hex[:8]}"
        self.authenticator.add_token(token, User.service_account(namespace, service_account))
        return token

    def compact(self) -> None:
        """Drop the watch history: a watch from an older resourceVersion gets 410 Expired."""
        self.store.compact()

    def cut_watches(self, garbage: bytes = b'{"type": "MODIFIED", "obj') -> int:
        """Cut every open watch: send `garbage` (by default half a line), then drop the
        connection without ending the chunked body, as a failing proxy or apiserver does.
        Returns how many watches were cut (each watch is cut once)."""
        watchers = [w for w in self.store.watchers if not w.cut]
        for watcher in watchers:
            watcher.cut = True
            watcher.queue.put_nowait((CUT, garbage))
        return len(watchers)

    def fail_watches(self, code: int = 504, reason: str = "Timeout",
                     message: str = "Timeout: Too large resource version: 1, current: 0") -> int:
        """End every open watch with an ERROR event carrying a `Status` of `code` (by default the
        504 a lagging apiserver's watch cache sends), as kube-apiserver does; returns how many."""
        status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
                  "reason": reason, "details": {"retryAfterSeconds": 1}, "code": code}
        watchers = [w for w in self.store.watchers if not w.cut]
        for watcher in watchers:
            watcher.cut = True
            watcher.queue.put_nowait(("ERROR", dict(status)))
        return len(watchers)

    def send_bookmarks(self) -> None:
        """Send a BOOKMARK now on every watch that allowed them."""
        self.store.bookmark()

    def collect_garbage(self) -> int:
        """Run the garbage collector until it settles; the number of actions it took."""
        return self.gc.run()

    def requests_for(self, method: str | None = None, path_prefix: str = "") -> list[RecordedRequest]:
        """The recorded requests with this method (any when None) whose path starts so."""
        return [r for r in self.requests
                if (method is None or r.method == method) and r.path.startswith(path_prefix)]

    # -- HTTP ----------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        content_type = request.headers.get("Content-Type")
        body: Any = None
        if raw:
            try:
                body = json.loads(raw, parse_constant=_not_json)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        self.requests.append(RecordedRequest(request.method, request.path, dict(request.query),
                                             content_type.split(";")[0].strip() if content_type else None,
                                             body))
        options = WriteOptions(dry_run=request.query.get("dryRun") == "All",
                               field_validation=request.query.get("fieldValidation", "Warn"))
        try:
            response = await self._dispatch(request, body, options)
        except ApiError as exc:
            response = _json(exc.status(), exc.code)
        for warning in options.warnings:
            response.headers.add("Warning", f'299 - "{escape(warning)}"')
        return response

    async def _dispatch(self, request: web.Request, body: Any, options: WriteOptions) -> web.StreamResponse:
        segments = [s for s in request.path.split("/") if s]
        if self.rbac:
            user = self.authenticator.authenticate(request.headers.get("Authorization"))
            attrs = attributes(request, segments)
            info = None
            if attrs.resource is not None:
                info = self._lookup(attrs.api_group, segments[1] if segments[0] == "api" else segments[2],
                                    attrs.resource)
                info = info or KindInfo(attrs.api_group, "", attrs.resource, attrs.resource)
            self.authorizer.check(user, attrs, info)
            if info is not None and attrs.verb in ("create", "update") and not attrs.subresource \
                    and isinstance(body, dict) and info.kind:
                old = self.store.find(info, attrs.namespace, attrs.name) if attrs.verb == "update" else None
                self.authorizer.check_owner_references(user, attrs, info, body, old)
        discovery = self._discovery(request, segments)
        if discovery is not None:
            return discovery
        target = self._target(segments)
        return await self._serve(request, target, body, options)

    async def _serve(self, request: web.Request, target: _Target, body: Any,
                     options: WriteOptions) -> web.StreamResponse:
        method, info, sub = request.method, target.info, target.subresource
        if sub == "proxy":
            if info.plural not in ("pods", "services") or target.name is None:
                raise ApiError.no_route()
            if info.plural == "services":
                return await self.pods.service_proxy(request, target.namespace or "", target.name, target.subpath)
            return await self.pods.proxy(request, target.namespace or "", target.name, target.subpath)
        if sub == "log":
            if method != "GET" or info.plural != "pods":
                raise ApiError.method_not_allowed()
            return await self.pods.log(request, target.namespace or "", target.name or "")
        if sub not in (None, "status", "scale", "finalize", "binding", "token"):
            raise ApiError.no_route()
        if target.name is None:
            return await self._collection(request, target, body, options)
        ns, name = target.namespace or "", target.name
        if sub == "status" and not info.has_status or sub == "scale" and not info.has_scale:
            raise ApiError.no_route()
        if sub in ("finalize", "binding", "token"):
            return self._special(method, info, ns, name, sub, body)
        if sub == "scale":
            return self._scale(method, info, ns, name, body, options)
        status = sub == "status"
        if method == "GET":
            return _json(present(info, self.store.get(info, ns, name)))
        if method == "PUT":
            return _json(present(info, self.store.replace(info, ns, name, object_body(body), status=status,
                                                          options=options)))
        if method == "PATCH":
            content_type = (request.headers.get("Content-Type") or "").split(";")[0].strip()
            if body is None or isinstance(body, str):
                raise ApiError.bad_request("the patch body is not valid JSON")
            return _json(present(info, self.store.patch(info, ns, name, content_type, body, status=status,
                                                        options=options)))
        if method == "DELETE" and not status:
            deletion = delete_options(request, body)
            obj, gone = self.store.delete(info, ns, name, deletion, options)
            if not gone:
                return _json(present(info, obj), 202 if deletion.get("orphanDependents") is False else 200)
            if not info.returns_deleted:
                return _json({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                              "details": {"name": name, "group": info.group, "kind": info.plural,
                                          "uid": obj["metadata"]["uid"]}})
            return _json(present(info, obj))
        raise ApiError.method_not_allowed()

    async def _collection(self, request: web.Request, target: _Target, body: Any,
                          options: WriteOptions) -> web.StreamResponse:
        info, method = target.info, request.method
        if method == "GET":
            selector = selector_of(request)
            if request.query.get("watch", "").lower() in ("true", "1", "t"):
                return await serve_watch(request, self.store, target.info, target.namespace, selector,
                                         bookmark_interval=self._bookmark_interval)
            return _json(list_page(request, self.store, target.info, target.namespace, selector))
        if method == "POST":
            if target.namespace is None and info.namespaced:
                raise ApiError.method_not_allowed()
            created = self.store.create(info, target.namespace or "", object_body(body), options)
            return _json(present(info, created), 201)
        if method == "DELETE":
            selector = selector_of(request)
            deleted = [present(info, self.store.delete(info, o["metadata"].get("namespace", ""),
                                                       o["metadata"]["name"], delete_options(request, body),
                                                       options)[0])
                       for o in self.store.list_objects(info, target.namespace, selector)]
            return _json({"kind": f"{info.kind}List", "apiVersion": info.api_version,
                          "metadata": {"resourceVersion": str(self.store.current_rv)}, "items": deleted})
        raise ApiError.method_not_allowed()

    def _scale(self, method: str, info: KindInfo, ns: str, name: str, body: Any,
               options: WriteOptions) -> web.Response:
        obj = self.store.get(info, ns, name)
        spec_path, status_path, selector_path = info.scale_paths

        def at(doc: Any, path: str) -> Any:
            for part in path.strip(".").split("."):
                doc = doc.get(part) if isinstance(doc, dict) else None
            return doc

        if method in ("PUT", "PATCH"):
            replicas = ((object_body(body).get("spec") or {}).get("replicas"))
            if not isinstance(replicas, int):
                raise ApiError.invalid(info, name, "spec.replicas: Invalid value: must be an integer")
            doc = present(info, obj)
            parts = spec_path.strip(".").split(".")
            node = doc
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = replicas
            obj = self.store.replace(info, ns, name, doc, status=False, options=options)
        elif method != "GET":
            raise ApiError.method_not_allowed()
        meta = {k: obj["metadata"][k] for k in ("name", "namespace", "uid", "resourceVersion",
                                                "creationTimestamp") if k in obj["metadata"]}
        status: Obj = {"replicas": at(obj, status_path) or 0}
        if selector_path and at(obj, selector_path):
            status["selector"] = at(obj, selector_path)
        return _json({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": meta,
                      "spec": {"replicas": at(obj, spec_path) or 0}, "status": status})

    def _special(self, method: str, info: KindInfo, ns: str, name: str, sub: str, body: Any) -> web.Response:
        if sub == "finalize" and info.plural == "namespaces" and method == "PUT":
            current = self.store.get(info, "", name)
            current["spec"] = {**(current.get("spec") or {}),
                               "finalizers": (object_body(body).get("spec") or {}).get("finalizers") or []}
            return _json(self.store.system_update(info, current))
        if sub == "binding" and info.plural == "pods" and method == "POST":
            pod = self.store.get(info, ns, name)
            if pod["spec"].get("nodeName"):
                raise ApiError.conflict(info, name, f"pod {name} is already assigned to node "
                                        f"\"{pod['spec']['nodeName']}\"")
            pod["spec"]["nodeName"] = ((object_body(body).get("target") or {}).get("name") or "")
            self.store.system_update(info, pod)
            return _json({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
                         201)
        if sub == "token" and info.plural == "serviceaccounts" and method == "POST":
            self.store.get(info, ns, name)
            return _json({"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                          "metadata": {"name": name, "namespace": ns},
                          "spec": (object_body(body).get("spec") or {}),
                          "status": {"token": self.token_for(ns, name),
                                     "expirationTimestamp": "2099-01-01T00:00:00Z"}}, 201)
        raise ApiError.method_not_allowed()

    def _lookup(self, group: str, version: str, plural: str) -> KindInfo | None:
        return self.store.kinds.lookup(group, version, plural)

    def _target(self, segments: list[str]) -> _Target:
        if len(segments) >= 3 and segments[0] == "api" and segments[1] == "v1":
            group, version, rest = "", segments[1], segments[2:]
        elif len(segments) >= 4 and segments[0] == "apis":
            group, version, rest = segments[1], segments[2], segments[3:]
        else:
            raise ApiError.no_route()
        if not group and rest[0] == "namespaces" and (len(rest) <= 2 or rest[2] in ("status", "finalize")):
            return _Target(NAMESPACES, None, rest[1] if len(rest) > 1 else None,
                           rest[2] if len(rest) > 2 else None, "")
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
            info = self._lookup(group, version, rest[0])
            if info is None or not info.namespaced:
                raise ApiError.no_route()
        else:
            namespace = None
            info = self._lookup(group, version, rest[0])
            if info is None or (info.namespaced and len(rest) > 1):
                raise ApiError.no_route()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        return _Target(info, namespace, name, sub, "/" + "/".join(rest[3:]))

    def _discovery(self, request: web.Request, segments: list[str]) -> web.Response | None:
        kinds = self.store.kinds
        aggregated = "as=APIGroupDiscoveryList" in request.headers.get("Accept", "")
        if segments == ["version"]:
            return _json({"major": "1", "minor": "32", "gitVersion": "v1.32.0-fake", "gitCommit": "0" * 40,
                          "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.23",
                          "compiler": "gc", "platform": "linux/amd64"})
        if segments in (["api"], ["apis"]) and aggregated:
            return web.Response(text=json.dumps(kinds.aggregated(legacy=segments == ["api"])),
                                headers={"Content-Type": _AGGREGATED})
        if segments == ["api"]:
            return _json({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": self.url.removeprefix("http://")}]})
        if segments == ["apis"]:
            return _json(kinds.api_group_list())
        if len(segments) == 2 and segments[0] == "apis":
            group_doc = kinds.api_group(segments[1])
            if group_doc is None:
                raise ApiError.no_route()
            return _json(group_doc)
        if segments == ["api", "v1"] or (len(segments) == 3 and segments[0] == "apis"):
            group, version = ("", "v1") if segments[0] == "api" else (segments[1], segments[2])
            resources = kinds.resource_list(group, version)
            if resources is None:
                raise ApiError.no_route()
            return _json(resources)
        return None


