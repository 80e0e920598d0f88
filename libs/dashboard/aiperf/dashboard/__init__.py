"""The web dashboard: static pages (job list, job detail with live progress, run metrics and
charts, run comparison) served as Litestar routes over a configurable `DataSource`."""

from aiperf.dashboard.routes import PAGES, UPLOT_VERSION, DataSource, dashboard_routes, render_page

__all__ = ["PAGES", "UPLOT_VERSION", "DataSource", "dashboard_routes", "render_page"]
