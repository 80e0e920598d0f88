"""Litestar routes serving the dashboard's pages and assets.

The pages are static HTML + one script; everything they show comes from JSON routes named by a
`DataSource` (URL templates), so the same pages read a results server's history or a live run's
api service. The source is written into each page as a JSON data island (no inline script).
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any

from litestar import Response, Router, get
from litestar.exceptions import NotFoundException
from litestar.params import FromPath
from litestar.types import ControllerRouterHandler

UPLOT_VERSION = "1.6.32"
"""The vendored charting library (static/vendor/README.md)."""

PAGES = ("index", "job", "run", "compare", "sweep")
"""Page names; each is served at ``PATH/`` (index) or ``PATH/<name>``."""

_ASSET_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
_ASSETS = ("dashboard.js", "dashboard.css", "vendor/uPlot.iife.min.js", "vendor/uPlot.min.css")


@dataclass(frozen=True, kw_only=True)
class DataSource:
    """Where the pages get their data: URL templates with ``{ns}``, ``{name}``, ``{epoch}`` and
    ``{file}`` placeholders (filled in URL-encoded), absolute paths or full URLs.

    - `jobs_url` answers ``{"jobs": [{"namespace", "name", "runCount", "latestEpoch", "phase",
      "progress"?}]}`` (the results server's ``GET /api/v1/results``);
    - `runs_url` answers ``{"runs": [{"epoch", "phase", "completedAt", "files": [{"name",
      "size"}]}]}``, newest first (the results server's ``GET .../{ns}/{name}/runs``);
    - `file_url` is one raw export file of one run (``profile_export_aiperf.json``,
      ``profile_export.jsonl``);
    - `status_url` (optional) answers a progress snapshot (the api's ``/api/progress`` shape:
      ``state``, ``progress`` per phase (``completed``, ``expected``, ``errors``, ``elapsed_s``),
      optional ``jobPhase``/``phase``, ``workers`` (``ready``, ``total``) and ``failures``
      (strings or failure events)); it is polled while `progress_ws_url` (optional, a WebSocket
      sending such snapshots) is down, every `poll_interval_s` seconds, until the phase is
      terminal or the status route answers 404. The results server's
      `aiperf.results_server.jobstatus` routes (operator mode) and the api's own serve them.
    - `sweeps_url` (optional: None hides the sweeps) answers ``{"sweeps": [...]}`` shaped as the
      job list (the results server's ``GET /api/v1/sweeps``: AIPerfSweeps with stored
      aggregates); `sweep_runs_url` and `sweep_file_url` are a sweep's stored aggregates and
      their files, as `runs_url` and `file_url` are a job's (``profile_export_aiperf_sweep.json``
      holds the per-combination table).
    """

    jobs_url: str = "/api/v1/results"
    runs_url: str = "/api/v1/results/{ns}/{name}/runs"
    file_url: str = "/api/v1/results/{ns}/{name}/runs/{epoch}/{file}"
    status_url: str | None = None
    progress_ws_url: str | None = None
    sweeps_url: str | None = "/api/v1/sweeps"
    sweep_runs_url: str = "/api/v1/sweeps/{ns}/{name}/runs"
    sweep_file_url: str = "/api/v1/sweeps/{ns}/{name}/runs/{epoch}/{file}"
    poll_interval_s: float = 2.0
    title: str = "AIPerf results"

    def page_config(self, base: str) -> dict[str, Any]:
        """The JSON the pages read: the templates (camelCase keys) and the dashboard's base path."""
        fields = asdict(self)
        return {"base": base, **{_camel(k): v for k, v in fields.items()}}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def _read(name: str) -> bytes:
    return (resources.files("aiperf.dashboard") / "static" / name).read_bytes()


def render_page(page: str, *, source: DataSource, base: str) -> str:
    """The HTML of `page` (one of `PAGES`) with its base path and data source filled in.
    Raises `KeyError` for an unknown page."""
    if page not in PAGES:
        raise KeyError(page)
    # `<` escaped inside the data island so no value can close the <script> element.
    config = json.dumps(source.page_config(base)).replace("<", "\\u003c")
    # Every page is the shared layout (head, header, error line) around its own content.
    text = (_read("layout.html").decode().replace("__PAGE__", page)
            .replace("__CONTENT__", _read(f"{page}.html").decode()))
    return (text.replace("__CONFIG__", config).replace("__BASE__", html.escape(base, quote=True))
            .replace("__TITLE__", html.escape(source.title)))


def dashboard_routes(*, source: DataSource, path: str = "/dashboard") -> list[ControllerRouterHandler]:
    """Route handlers (one `Router` at `path`) for the dashboard over `source`.

    Serves ``GET path/`` (job and sweep lists), ``path/job?ns=&name=`` (live progress and runs of a job),
    ``path/sweep?ns=&name=`` (a sweep's stored aggregates and its per-combination table),
    ``path/run?ns=&name=&epoch=`` (metric tables and charts of one run),
    ``path/compare?ns=&name=&epochs=a,b`` (runs side by side) and ``path/static/...`` (script,
    style, vendored uPlot). Pages and assets are read once, here; nothing blocks per request.
    Mount them into any Litestar app: ``Litestar(route_handlers=[*dashboard_routes(...)])``.
    """
    base = "/" + path.strip("/") if path.strip("/") else ""
    pages = {p: render_page(p, source=source, base=base) for p in PAGES}
    assets = {name: _read(name) for name in _ASSETS}

    def page_handler(name: str) -> Any:
        body = pages[name]

        # One static route per page: a path parameter here would shadow the host app's
        # one-segment routes when the dashboard is mounted at "/".
        @get("/" if name == "index" else f"/{name}", name=f"dashboard-{name}", sync_to_thread=False,
             include_in_schema=False)
        def page() -> Response[str]:
            return Response(content=body, media_type="text/html; charset=utf-8",
                            headers={"Cache-Control": "no-cache"})

        return page

    @get("/static/{name:path}", sync_to_thread=False, include_in_schema=False)
    def asset(name: FromPath[str]) -> Response[bytes]:
        key = name.lstrip("/")
        if key not in assets:
            raise NotFoundException(detail=f"no dashboard asset {key!r}")
        suffix = key[key.rfind("."):]
        return Response(content=assets[key], media_type=_ASSET_TYPES[suffix],
                        headers={"Cache-Control": "max-age=300"})

    return [Router(path=base or "/", route_handlers=[*map(page_handler, PAGES), asset])]


__all__ = ["PAGES", "UPLOT_VERSION", "DataSource", "dashboard_routes", "render_page"]
