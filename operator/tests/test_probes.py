"""/healthz follows readiness; /metrics is the Prometheus text of the counters."""

from __future__ import annotations

import aiohttp
import pytest

from aiperf.operator.metrics import Metrics
from aiperf.operator.probes import build_app, serving

pytestmark = pytest.mark.anyio


def test_counters_render_in_the_text_format_sorted_and_escaped() -> None:
    metrics = Metrics()
    metrics.reconciled("create")
    metrics.reconciled("create")
    metrics.failed('we"ird')
    metrics.entered_phase("Running")
    text = metrics.render()
    assert 'aiperf_operator_reconciles_total{handler="create"} 2\n' in text
    assert 'aiperf_operator_errors_total{handler="we\\"ird"} 1\n' in text
    assert text.index("# TYPE aiperf_operator_runs_total counter") < text.index(
        'aiperf_operator_runs_total{phase="Running"} 1')
    assert text.endswith("\n") and metrics.value("runs", "Completed") == 0


async def test_healthz_is_503_until_ready_then_200() -> None:
    ready = False
    metrics = Metrics()
    async with serving(build_app(metrics=metrics, ready=lambda: ready), host="127.0.0.1", port=0) as port:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/healthz") as response:
                assert response.status == 503
            ready = True
            async with http.get(f"http://127.0.0.1:{port}/healthz") as response:
                assert response.status == 200 and await response.text() == "ok\n"
            async with http.get(f"http://127.0.0.1:{port}/metrics") as response:
                assert response.status == 200 and "aiperf_operator_reconciles_total" in await response.text()
