"""The dashboard's routes: pages with their data source filled in, assets from the package
(the vendored uPlot included), nothing from elsewhere, and mounting at a prefix or at the root."""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest
from litestar import Litestar, get
from litestar.testing import TestClient

from aiperf.dashboard import PAGES, UPLOT_VERSION, DataSource, dashboard_routes

SOURCE = DataSource(status_url="/status/{ns}/{name}", progress_ws_url="/ws/{ns}/{name}", poll_interval_s=0.5,
                    title="T </script><b>")


def config_of(html: str) -> dict[str, object]:
    match = re.search(r'<script id="dash-config" type="application/json">(.*?)</script>', html, re.S)
    assert match, "no config data island"
    data: dict[str, object] = json.loads(match.group(1))
    return data


@pytest.mark.parametrize("path, base", [("/dashboard", "/dashboard"), ("/", ""), ("ui/", "/ui")])
def test_every_page_is_served_with_its_config(path: str, base: str) -> None:
    with TestClient(Litestar(route_handlers=dashboard_routes(source=SOURCE, path=path))) as client:
        for page in PAGES:
            url = f"{base}/" if page == "index" else f"{base}/{page}"
            response = client.get(url)
            assert response.status_code == 200, url
            assert response.headers["content-type"].startswith("text/html")
            assert f'data-page="{page}"' in response.text
            assert f'src="{base}/static/dashboard.js"' in response.text
            config = config_of(response.text)
            assert config == {"base": base, "jobsUrl": "/api/v1/results",
                              "runsUrl": "/api/v1/results/{ns}/{name}/runs",
                              "fileUrl": "/api/v1/results/{ns}/{name}/runs/{epoch}/{file}",
                              "statusUrl": "/status/{ns}/{name}", "progressWsUrl": "/ws/{ns}/{name}",
                              "sweepsUrl": "/api/v1/sweeps", "sweepRunsUrl": "/api/v1/sweeps/{ns}/{name}/runs",
                              "sweepFileUrl": "/api/v1/sweeps/{ns}/{name}/runs/{epoch}/{file}",
                              "pollIntervalS": 0.5, "title": "T </script><b>"}
            assert "<b>" not in response.text  # the title is escaped everywhere


def test_assets_come_from_the_package() -> None:
    with TestClient(Litestar(route_handlers=dashboard_routes(source=DataSource()))) as client:
        js = client.get("/dashboard/static/vendor/uPlot.iife.min.js")
        assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
        assert b"uPlot" in js.content
        assert client.get("/dashboard/static/dashboard.css").headers["content-type"].startswith("text/css")
        assert client.get("/dashboard/static/dashboard.js").status_code == 200
        for bad in ("/dashboard/static/../routes.py", "/dashboard/static/vendor/README.md",
                    "/dashboard/static/index.html", "/dashboard/nope"):
            assert client.get(bad).status_code == 404, bad


def test_the_dashboard_does_not_shadow_the_host_apps_routes() -> None:
    @get("/health", sync_to_thread=False)
    def health() -> str:
        return "ok"

    app = Litestar(route_handlers=[health, *dashboard_routes(source=DataSource(), path="/")])
    with TestClient(app) as client:
        assert client.get("/health").text == "ok"
        assert client.get("/job").status_code == 200


def test_nothing_is_loaded_from_another_origin() -> None:
    static = resources.files("aiperf.dashboard") / "static"
    for name in ("layout.html", "index.html", "job.html", "run.html", "compare.html", "dashboard.js",
                 "dashboard.css"):
        text = (static / name).read_text()
        assert not re.search(r"(src|href)=[\"']?(https?:)?//", text), name
        assert "cdn" not in text.lower(), name
    readme = (static / "vendor" / "README.md").read_text()
    assert f"uPlot {UPLOT_VERSION}" in readme and "MIT" in readme
    assert "MIT License" in (static / "vendor" / "uPlot.LICENSE").read_text()
