"""`kube dashboard`: the operator's results server (its dashboard and JSON routes) on a local
port, forwarded through the API server's service proxy (no kubectl), opened in the browser.

The results server is the operator chart's Service `aiperf-operator`, port 8081 (`http-results`,
deploy/helm/aiperf-operator/templates/service.yaml). Each local GET/HEAD goes to
``.../namespaces/NS/services/aiperf-operator:8081/proxy/PATH?QUERY`` with the kubeconfig's
credentials; the response streams back. WebSocket upgrades are not forwarded: the dashboard
then polls.
"""

from __future__ import annotations

import sys
import webbrowser
from collections.abc import Awaitable, Callable

import aiohttp
import anyio
from aiohttp import web

from aiperf.cli.kube_options import KubeTarget
from aiperf.cli.kube_shared import EXIT_FAILED, EXIT_OK, error, run_async, session
from aiperf.kubeapi import SERVICES, KubeApi, KubeClusterError, KubeError, proxy_path

RESULTS_SERVICE = "aiperf-operator"
RESULTS_PORT = 8081
DASHBOARD_PATH = "/dashboard/"
JOBS_PATH = "/api/v1/results"
_PASSED_BACK = ("Content-Type", "Content-Disposition", "Cache-Control", "Last-Modified", "ETag")


class ServiceForwarder:
    """An aiohttp app forwarding GET and HEAD to `upstream` + the request's path and query, with
    headers from `auth` (awaited per request), through `session` (and `proxy`, if any). Other
    methods answer 405; an unreachable upstream answers 502 with a JSON detail."""

    def __init__(self, *, session: aiohttp.ClientSession, upstream: str,
                 auth: Callable[[], Awaitable[dict[str, str]]], proxy: str | None = None) -> None:
        self._session, self._upstream, self._auth, self._proxy = session, upstream.rstrip("/"), auth, proxy

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            return web.json_response({"status_code": 405, "detail": "only GET and HEAD are forwarded"},
                                     status=405)
        headers = {**await self._auth(), "Accept": request.headers.get("Accept", "*/*")}
        url = self._upstream + request.rel_url.raw_path_qs
        try:
            async with self._session.request(request.method, url, headers=headers, proxy=self._proxy,
                                             allow_redirects=False) as upstream:
                response = web.StreamResponse(status=upstream.status)
                for name in _PASSED_BACK:
                    if name in upstream.headers:
                        response.headers[name] = upstream.headers[name]
                await response.prepare(request)
                async for chunk in upstream.content.iter_chunked(1 << 16):
                    await response.write(chunk)
                await response.write_eof()
                return response
        except aiohttp.ClientError as exc:
            return web.json_response({"status_code": 502, "detail": f"cannot reach the results server: {exc}"},
                                     status=502)


async def _check_reachable(session: aiohttp.ClientSession, upstream: str, headers: dict[str, str],
                           proxy: str | None, namespace: str) -> None:
    """KubeError naming the fix when the results server cannot be reached through the proxy;
    KubeClusterError when the API server itself cannot be reached."""
    try:
        async with session.get(upstream + JOBS_PATH, headers=headers, proxy=proxy) as response:
            status = response.status
    except aiohttp.ClientError as exc:
        raise KubeClusterError(f"cannot reach the API server: {exc}") from None
    if status in (401, 403):
        raise KubeError(f"not allowed to reach Service {RESULTS_SERVICE} in namespace {namespace} "
                        f"({status}): you need get on services/proxy there")
    if status >= 400:
        raise KubeError(f"no results server at Service {RESULTS_SERVICE}:{RESULTS_PORT} in namespace "
                        f"{namespace} (HTTP {status}); is the operator chart installed there? "
                        "Pass its namespace with --operator-namespace")


async def serve_dashboard(api: KubeApi, *, namespace: str, port: int, open_browser: bool,
                          opener: Callable[[str], object] | None = None,
                          task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED) -> None:
    """Check the results server answers, listen on 127.0.0.1:`port` (0: any free port), report
    the dashboard URL as started (and open it with `opener`, default `webbrowser.open`, when
    `open_browser`), and forward
    until cancelled. KubeError when the server cannot be reached."""
    upstream = api.url(proxy_path(SERVICES, namespace, RESULTS_SERVICE, RESULTS_PORT))
    await _check_reachable(api.session, upstream, await api.auth_headers(), api.proxy, namespace)
    forwarder = ServiceForwarder(session=api.session, upstream=upstream, auth=api.auth_headers, proxy=api.proxy)
    runner = web.AppRunner(forwarder.app(), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", port)
        await site.start()
        bound = runner.addresses[0][1]
        url = f"http://127.0.0.1:{bound}{DASHBOARD_PATH}"
        print(f"dashboard of the results server ({RESULTS_SERVICE}:{RESULTS_PORT} in {namespace}): {url}",
              flush=True)
        print("Ctrl-C stops forwarding", file=sys.stderr, flush=True)
        task_status.started(url)
        if open_browser:
            (opener or webbrowser.open)(url)
        await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True):
            await runner.cleanup()


def dashboard_command(target: KubeTarget, *, operator_namespace: str, port: int, open_browser: bool) -> int:
    """`aiperf kube dashboard`: forward until Ctrl-C (exit 0); exit 2 for a results server that
    cannot be reached (with the reason), 1 when the cluster fails."""
    if not 0 <= port <= 65535:
        error(f"--port {port} is not a TCP port; give 0..65535 (0: any free port)")
        return 2

    async def work() -> int:
        async with session(target) as (api, _):
            await serve_dashboard(api, namespace=operator_namespace, port=port, open_browser=open_browser)
        return EXIT_OK

    try:
        return run_async(work)
    except KeyboardInterrupt:
        return EXIT_OK
    except OSError as exc:
        error(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}; pick another --port")
        return EXIT_FAILED


__all__ = ["DASHBOARD_PATH", "RESULTS_PORT", "RESULTS_SERVICE", "ServiceForwarder", "dashboard_command",
           "serve_dashboard"]
