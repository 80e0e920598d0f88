"""Which endpoints a run scrapes: each server's own `/metrics` (at the root of each endpoint URL,
as AIPerf does for several) always, plus every `server_metrics.urls` entry; none when
`server_metrics.enabled` is false."""

from __future__ import annotations

from urllib.parse import urlsplit

from aiperf.config import Benchmark


def metrics_url(url: str) -> str:
    """`url` with `http://` when it has no scheme and `/metrics` when it has no path."""
    url = url.strip()
    if "://" not in url:
        url = f"http://{url}"
    return url if urlsplit(url).path.strip("/") else url.rstrip("/") + "/metrics"


def endpoints_of(benchmark: Benchmark) -> list[str]:
    """The run's metrics endpoints, deduplicated, in order (the servers' own first)."""
    spec = benchmark.server_metrics
    if not spec.enabled:
        return []
    own = [benchmark.endpoint.metrics_url(i) for i in range(len(benchmark.endpoint.urls))]
    return list(dict.fromkeys([*own, *map(metrics_url, spec.urls)]))
