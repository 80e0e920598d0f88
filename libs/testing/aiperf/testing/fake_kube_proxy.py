"""A process in a fake pod played by a real server: `forward_to(url)` is a `ProxyHandler` that
relays what reaches `.../pods/POD:PORT/proxy/PATH` to `url + PATH`, as the API server's
upgrade-aware proxy does:

- plain HTTP: method, query, body and end-to-end headers go up; status, headers and the body
  (streamed) come back;
- a WebSocket upgrade (`Connection: Upgrade`, `Upgrade: websocket`) is answered with the
  upstream's own refusal when it refuses (its status, e.g. 404 from a server without that
  route), else both sides are joined and every message is relayed until one side closes, whose
  close code the other side gets.

The pod-side rules stay the fake's (`fake_kube_pods.PodRuntime.proxy`): a running pod with a
podIP, something registered on the port, the caller allowed `get` on `pods/proxy` (RBAC).
"""

from __future__ import annotations

import aiohttp
import anyio
from aiohttp import WSMsgType, web

from aiperf.testing.fake_kube_api import ApiError
from aiperf.testing.fake_kube_pods import ProxyHandler

_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                         "transfer-encoding", "upgrade", "host", "authorization", "content-length",
                         "sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions",
                         "sec-websocket-accept"})
"""Not forwarded: hop-by-hop headers, the API server's own credentials, and what aiohttp sets."""


def _end_to_end(headers: aiohttp.typedefs.LooseHeaders) -> dict[str, str]:
    return {k: v for k, v in dict(headers).items() if k.lower() not in _HOP_BY_HOP}


def is_websocket_upgrade(request: web.Request) -> bool:
    """True when the request asks to switch to the WebSocket protocol."""
    return ("upgrade" in request.headers.get("Connection", "").lower()
            and request.headers.get("Upgrade", "").lower() == "websocket")


def forward_to(base_url: str) -> ProxyHandler:
    """A ProxyHandler relaying to the server at `base_url` (`http://127.0.0.1:PORT`). A server
    that does not accept the connection (not listening yet, gone) is the API server's 503 with
    its dial error, as for a port nothing listens on."""
    base = base_url.rstrip("/")

    async def handler(request: web.Request, path: str) -> web.StreamResponse:
        url = base + (path or "/")
        async with aiohttp.ClientSession() as session:
            try:
                if is_websocket_upgrade(request):
                    return await _relay_websocket(request, session, url)
                return await _relay_http(request, session, url)
            except aiohttp.ClientConnectorError as exc:
                raise ApiError(503, "ServiceUnavailable", f"error trying to reach service: dial tcp "
                               f"{exc.host}:{exc.port}: connect: connection refused") from None

    return handler


async def _relay_http(request: web.Request, session: aiohttp.ClientSession, url: str) -> web.StreamResponse:
    body = await request.read()
    async with session.request(request.method, url, params=request.query, data=body or None,
                               headers=_end_to_end(request.headers), allow_redirects=False) as upstream:
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason,
                                      headers=_end_to_end(upstream.headers))
        await response.prepare(request)
        async for chunk in upstream.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
        return response


async def _relay_websocket(request: web.Request, session: aiohttp.ClientSession, url: str) -> web.StreamResponse:
    protocols = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()]
    try:
        upstream = await session.ws_connect(url, params=request.query, protocols=protocols,
                                            headers=_end_to_end({k: v for k, v in request.headers.items()
                                                                 if k.lower() != "sec-websocket-protocol"}))
    except aiohttp.WSServerHandshakeError as exc:
        return web.Response(status=exc.status, text=exc.message or "upgrade refused by the pod")
    async with upstream:
        downstream = web.WebSocketResponse(protocols=protocols)
        await downstream.prepare(request)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_pump, upstream, downstream, tg.cancel_scope)
            tg.start_soon(_pump, downstream, upstream, tg.cancel_scope)
        if not downstream.closed:
            await downstream.close(code=upstream.close_code or aiohttp.WSCloseCode.OK)
        if not upstream.closed:
            await upstream.close(code=downstream.close_code or aiohttp.WSCloseCode.OK)
        return downstream


async def _pump(source: aiohttp.ClientWebSocketResponse | web.WebSocketResponse,
                sink: aiohttp.ClientWebSocketResponse | web.WebSocketResponse, scope: anyio.CancelScope) -> None:
    """Relay `source`'s messages to `sink` until `source` closes; then stop the other direction."""
    async for message in source:
        if message.type == WSMsgType.TEXT:
            await sink.send_str(message.data)
        elif message.type == WSMsgType.BINARY:
            await sink.send_bytes(message.data)
    scope.cancel()


__all__ = ["forward_to", "is_websocket_upgrade"]
