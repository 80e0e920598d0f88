"""The kubelet's side of pods for the fake API server: the status a running or finished pod
shows, `pods/log` and `pods/proxy` with the rules a real cluster applies.

- `pods/log`: a container name is required when the pod has several (400), an unscheduled pod
  has an empty log, a container that has no status yet is "not available" and a waiting one "is
  waiting to start: REASON" (400 both, as the kubelet answers); `tailLines`; `follow=true`
  streams what is appended (`append_log`) until the container terminates or the pod goes.
- `pods/proxy` (`POD`, `POD:PORT`, `SCHEME:POD:PORT`): the pod needs `status.podIP` (else 400
  "address not allowed", the apiserver's answer), and something must listen on the port
  (`register_proxy`) in a running container of an unfinished pod; otherwise 503, the dial
  error the apiserver reports. Without a port the first declared containerPort is used, else 80.
- `services/proxy` (`SVC`, `SVC:PORT`, `SCHEME:SVC:PORT`; PORT a service port's name or number,
  else the first): the service's selector picks a Ready pod with a podIP (the endpoints), its
  `targetPort` (a number, or a containerPort name in that pod) the port; then as `pods/proxy`.
  No such port: 503 "no service port"; no ready pod: 503 "no endpoints available".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from aiohttp import web

from aiperf.testing.fake_kube_api import ApiError, Obj
from aiperf.testing.fake_kube_kinds import PODS, SERVICES
from aiperf.testing.fake_kube_select import Requirement, Selector
from aiperf.testing.fake_kube_store import Store, now_rfc3339

ProxyHandler = Callable[[web.Request, str], Awaitable[web.StreamResponse]]
"""Answers one request proxied to a pod: gets the request and the path after `/proxy`."""


class PodRuntime:
    """Pod logs, proxied ports and container states, kept beside the `store`."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._logs: dict[tuple[str, str, str | None], str] = {}
        self._proxies: dict[tuple[str, str, int], tuple[ProxyHandler, str | None]] = {}
        self._tick = asyncio.Event()
        self.closing = False

    # -- what tests set ------------------------------------------------------------------------

    def set_log(self, namespace: str, pod: str, text: str, container: str | None = None) -> None:
        """The whole log of `container` (None: any container without its own log)."""
        self._logs[(namespace, pod, container)] = text
        self.notify()

    def append_log(self, namespace: str, pod: str, text: str, container: str | None = None) -> None:
        """Append to a log; followers (`follow=true`) receive it."""
        self._logs[(namespace, pod, container)] = self._logs.get((namespace, pod, container), "") + text
        self.notify()

    def register_proxy(self, namespace: str, pod: str, port: int, handler: ProxyHandler,
                       container: str | None = None) -> None:
        """Something listens on `port` of the pod, in `container` (None: the container that
        declares that containerPort, else any of its containers)."""
        self._proxies[(namespace, pod, int(port))] = (handler, container)

    def notify(self) -> None:
        """Wake log followers (after a log or a pod status changed)."""
        self._tick.set()
        self._tick = asyncio.Event()

    def run(self, namespace: str, name: str, *, node: str = "fake-node", ip: str | None = None) -> Obj:
        """Schedule the pod and start every container (as scheduler and kubelet would): nodeName,
        podIP, hostIP, phase Running, Ready, each container running."""
        pod = self._store.get(PODS, namespace, name)
        pod["spec"]["nodeName"] = pod["spec"].get("nodeName") or node
        started = now_rfc3339()
        status = pod.setdefault("status", {})
        status.update({"phase": "Running", "podIP": ip or status.get("podIP") or self._store.allocate_ip("10.244"),
                       "hostIP": "192.0.2.10", "startTime": status.get("startTime") or started,
                       "conditions": [{"type": t, "status": "True", "lastTransitionTime": started}
                                      for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]})
        status["podIPs"] = [{"ip": status["podIP"]}]
        status["containerStatuses"] = [_container_status(c, {"running": {"startedAt": started}}, ready=True)
                                       for c in pod["spec"].get("containers") or []]
        result = self._store.system_update(PODS, pod)
        self.notify()
        return result

    def terminate(self, namespace: str, name: str, exit_codes: dict[str, int] | None = None,
                  *, phase: str | None = None) -> Obj:
        """Every container ends (exit code 0 unless `exit_codes` says otherwise); the phase
        becomes Succeeded when all exited 0, else Failed (or `phase`)."""
        pod = self._store.get(PODS, namespace, name)
        codes = {c["name"]: (exit_codes or {}).get(c["name"], 0) for c in pod["spec"].get("containers") or []}
        ended = now_rfc3339()
        status = pod.setdefault("status", {})
        status["phase"] = phase or ("Succeeded" if all(v == 0 for v in codes.values()) else "Failed")
        status["containerStatuses"] = [
            _container_status(c, {"terminated": {"exitCode": codes[c["name"]], "finishedAt": ended,
                                                 "reason": "Completed" if codes[c["name"]] == 0 else "Error"}},
                              ready=False)
            for c in pod["spec"].get("containers") or []]
        for condition in status.get("conditions") or []:
            if condition["type"] in ("Ready", "ContainersReady"):
                condition["status"] = "False"
        result = self._store.system_update(PODS, pod)
        self.notify()
        return result

    def set_container_state(self, namespace: str, name: str, container: str, state: Obj) -> Obj:
        """Set one container's state (`{"waiting": {"reason": "ImagePullBackOff"}}`, ...)."""
        pod = self._store.get(PODS, namespace, name)
        statuses = pod.setdefault("status", {}).setdefault("containerStatuses", [])
        spec = next(c for c in pod["spec"]["containers"] if c["name"] == container)
        entry = _container_status(spec, state, ready="running" in state)
        pod["status"]["containerStatuses"] = [s for s in statuses if s["name"] != container] + [entry]
        result = self._store.system_update(PODS, pod)
        self.notify()
        return result

    # -- pods/log ------------------------------------------------------------------------------

    async def log(self, request: web.Request, namespace: str, pod_name: str) -> web.StreamResponse:
        pod = self._store.get(PODS, namespace, pod_name)
        containers = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        container = request.query.get("container")
        if container is None:
            if len(containers) != 1:
                raise ApiError.bad_request(f"a container name must be specified for pod {pod_name}, choose one "
                                           f"of: [{' '.join(c for c in containers if c)}]")
            container = containers[0]
        if container not in containers:
            raise ApiError.bad_request(f"container {container} is not valid for pod {pod_name}")
        if not pod["spec"].get("nodeName"):
            return web.Response(text="", content_type="text/plain")  # not scheduled: no log location
        self._check_log_state(pod, pod_name, container)
        tail = request.query.get("tailLines")
        text = self._text(namespace, pod_name, container)
        if tail is not None:
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-int(tail):]) if int(tail) > 0 else ""
        if request.query.get("follow", "").lower() not in ("true", "1"):
            return web.Response(text=text, content_type="text/plain")
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        sent = len(self._text(namespace, pod_name, container))
        with contextlib.suppress(ConnectionError):
            await response.write(text.encode())
            while not self.closing:
                tick = self._tick
                current = self._store.find(PODS, namespace, pod_name)
                full = self._text(namespace, pod_name, container)
                if len(full) > sent:
                    await response.write(full[sent:].encode())
                    sent = len(full)
                if current is None or current["metadata"]["uid"] != pod["metadata"]["uid"] or \
                        _state(current, container) == "terminated":
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(tick.wait(), 0.5)
                if request.transport is None or request.transport.is_closing():
                    break
            await response.write_eof()
        return response

    def _text(self, namespace: str, pod: str, container: str) -> str:
        text = self._logs.get((namespace, pod, container))
        return text if text is not None else self._logs.get((namespace, pod, None), "")

    def _check_log_state(self, pod: Obj, pod_name: str, container: str) -> None:
        status = next((s for s in (pod.get("status") or {}).get("containerStatuses") or []
                       if s.get("name") == container), None)
        if status is None:
            raise ApiError.bad_request(f'container "{container}" in pod "{pod_name}" is not available')
        state = status.get("state") or {}
        if "waiting" in state:
            reason = (state["waiting"] or {}).get("reason") or "ContainerCreating"
            reason = {"ErrImagePull": "image can't be pulled",
                      "ImagePullBackOff": "trying and failing to pull image"}.get(reason, reason)
            raise ApiError.bad_request(f'container "{container}" in pod "{pod_name}" is waiting to start: {reason}')
        if not state:
            raise ApiError.bad_request(f'container "{container}" in pod "{pod_name}" is waiting to start - no '
                                       "logs yet")

    # -- pods/proxy ----------------------------------------------------------------------------

    async def proxy(self, request: web.Request, namespace: str, target: str, subpath: str) -> web.StreamResponse:
        parts = target.split(":")
        if len(parts) > 3 or not parts[-1 if len(parts) == 1 else -2]:
            raise ApiError.bad_request(f'invalid pod request "{target}"')
        name = parts[0] if len(parts) == 1 else parts[-2]
        port_text = parts[-1] if len(parts) >= 2 else ""
        pod = self._store.get(PODS, namespace, name)
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        if not port_text:
            declared = [p["containerPort"] for c in spec.get("containers") or [] for p in c.get("ports") or []]
            port_text = str(declared[0]) if declared else "80"
        if not port_text.isdigit():
            raise ApiError.bad_request(f'invalid pod request "{target}"')
        ip = status.get("podIP")
        if not ip:
            raise ApiError.bad_request("address not allowed")
        port = int(port_text)
        registered = self._proxies.get((namespace, name, port))
        if registered is None or not self._serving(pod, port, registered[1]):
            raise ApiError(503, "ServiceUnavailable", f"error trying to reach service: dial tcp {ip}:{port}: "
                           "connect: connection refused")
        return await registered[0](request, subpath)

    async def service_proxy(self, request: web.Request, namespace: str, target: str,
                            subpath: str) -> web.StreamResponse:
        parts = target.split(":")
        if len(parts) > 3 or not parts[-1 if len(parts) == 1 else -2]:
            raise ApiError.bad_request(f'invalid service request "{target}"')
        name = parts[0] if len(parts) == 1 else parts[-2]
        wanted = parts[-1] if len(parts) >= 2 else ""
        service = self._store.get(SERVICES, namespace, name)
        spec = service.get("spec") or {}
        ports = spec.get("ports") or []
        port = next((p for p in ports if not wanted or p.get("name") == wanted or str(p.get("port")) == wanted), None)
        if port is None:
            raise ApiError(503, "ServiceUnavailable", f'no service port "{wanted}" found for service "{name}"')
        selector = Selector([_equals(k, v) for k, v in (spec.get("selector") or {}).items()])
        ready = [p for p in self._store.list_objects(PODS, namespace, selector)
                 if spec.get("selector") and _ready(p) and (p.get("status") or {}).get("podIP")]
        if not ready:
            raise ApiError(503, "ServiceUnavailable", f'no endpoints available for service "{name}"')
        pod = ready[0]
        target_port = port.get("targetPort", port.get("port"))
        if isinstance(target_port, str) and not target_port.isdigit():
            target_port = next((p["containerPort"] for c in pod["spec"].get("containers") or []
                                for p in c.get("ports") or [] if p.get("name") == target_port), None)
            if target_port is None:
                raise ApiError(503, "ServiceUnavailable", f'no endpoints available for service "{name}"')
        return await self.proxy(request, namespace, f"{pod['metadata']['name']}:{target_port}", subpath)

    def _serving(self, pod: Obj, port: int, container: str | None) -> bool:
        """Whether the process listening on `port` (in `container`) is up."""
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return False
        if container is None:
            container = next((c["name"] for c in pod["spec"].get("containers") or []
                              if any(p.get("containerPort") == port for p in c.get("ports") or [])), None)
        names = [container] if container else [c["name"] for c in pod["spec"].get("containers") or []]
        return any(_state(pod, n) == "running" for n in names)


def _equals(key: str, value: str) -> Requirement:
    return lambda labels: labels.get(key) == value


def _ready(pod: Obj) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def _state(pod: Obj, container: str) -> str | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == container:
            state = status.get("state") or {}
            return next(iter(state), None)
    return None


def _container_status(container: Obj, state: Obj, *, ready: bool) -> Obj:
    return {"name": container["name"], "image": container.get("image", ""), "imageID": "",
            "containerID": f"containerd://{container['name']}", "ready": ready, "restartCount": 0,
            "started": "running" in state, "state": state, "lastState": {}}
