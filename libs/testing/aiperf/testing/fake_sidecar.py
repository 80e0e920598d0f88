"""A fake of the controller pod's results sidecar behind the fake API server's pod proxy: the
endpoints of `aiperf.results_sidecar.app` (status, file list, files, shutdown) over a dict of files.

`kube.register_proxy(ns, pod, 9091, FakeSidecar(files))` makes `.../pods/POD:9091/proxy/...`
reach it while the pod's `results-sidecar` container runs. `POST /shutdown` records the call and
ends that container in the fake (the kubelet's part), so later proxied requests are refused as
on a real cluster. Transfers of the files named in `broken` are cut after part of the body
(until a test takes them out of that set).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from aiohttp import web

RESULTS_CONTAINER = "results-sidecar"


class FakeSidecar:
    """The sidecar of pod `pod` in `namespace` of `kube` (a `FakeKube`; None: shutdown only
    records). `ended` False answers 409 for files, as the real one does while the run goes on."""

    def __init__(self, files: Mapping[str, bytes], *, kube: Any = None, namespace: str = "", pod: str = "",
                 ended: bool = True, exit_code: int | None = 0, broken: Iterable[str] = ()) -> None:
        self.files, self.ended, self.exit_code = dict(files), ended, exit_code
        self._kube, self._namespace, self._pod = kube, namespace, pod
        self.broken = set(broken)
        self.shutdowns = 0
        self.served: list[str] = []

    async def __call__(self, request: web.Request, path: str) -> web.StreamResponse:
        if request.method == "POST" and path == "/shutdown":
            self.shutdowns += 1
            if self._kube is not None:
                self._kube.end_container(self._namespace, self._pod, RESULTS_CONTAINER, 0)
            return web.json_response({"shutting_down": True}, status=202)
        if request.method != "GET":
            return _error(405, "method not allowed")
        if path == "/api/status":
            return web.json_response(self.status())
        if path.startswith("/api/results/files") and not self.ended:
            return _error(409, "the run is still going; the exports are not final yet")
        if path == "/api/results/files":
            return web.json_response({"files": [{"name": n, "size": len(b)} for n, b in sorted(self.files.items())]})
        name = path.removeprefix("/api/results/files/")
        if name not in self.files:
            return _error(404, f"{name} not written yet")
        self.served.append(name)
        if name in self.broken:
            return await _cut(request, self.files[name])
        return web.Response(body=self.files[name])

    def status(self) -> dict[str, Any]:
        """The `/api/status` body."""
        if not self.ended:
            return {"ended": False, "how": None, "state": None, "exit_code": None, "reason": "",
                    "results_ready": False, "was_cancelled": False, "partial": False}
        ok = self.exit_code == 0
        return {"ended": True, "how": "marker", "state": "done" if ok else "failed", "exit_code": self.exit_code,
                "reason": "", "results_ready": ok, "was_cancelled": False, "partial": False}


def _error(status: int, detail: str) -> web.Response:
    return web.json_response({"status_code": status, "detail": detail}, status=status)


async def _cut(request: web.Request, body: bytes) -> web.StreamResponse:
    """Announce the whole body, send half, then drop the connection (a transfer that breaks)."""
    response = web.StreamResponse(headers={"Content-Length": str(len(body))})
    await response.prepare(request)
    await response.write(body[: len(body) // 2])
    if request.transport is not None:
        request.transport.close()
    return response


__all__ = ["FakeSidecar"]
