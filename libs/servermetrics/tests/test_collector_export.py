"""Collector rounds and phase windows, the export's shape, and the CR projection's caps, against
a scripted fetch (our own `Fetch` port) and a stepping clock."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest

from aiperf.servermetrics import (
    CURATED_METRIC_NAMES,
    FetchError,
    ProjectionLimits,
    ServerMetricsCollector,
    build_export,
    project_for_cr,
    write_exports,
)

pytestmark = pytest.mark.anyio

A, B = "http://a:8000/metrics", "http://b:9000/metrics"


def _text(tokens: float, running: float, ttft: list[float], extra: str = "") -> str:
    buckets = "".join(f'vllm:time_to_first_token_seconds_bucket{{le="{le}"}} {sum(t <= le for t in ttft)}\n'
                      for le in (0.02, 0.04, 0.06))
    return (f"# HELP vllm:generation_tokens_total Generated tokens.\n# TYPE vllm:generation_tokens_total counter\n"
            f'vllm:generation_tokens_total{{model_name="m"}} {tokens}\n'
            f"# HELP vllm:num_requests_running Running.\n# TYPE vllm:num_requests_running gauge\n"
            f'vllm:num_requests_running{{model_name="m"}} {running}\n'
            f"# HELP vllm:time_to_first_token_seconds TTFT.\n# TYPE vllm:time_to_first_token_seconds histogram\n"
            f'{buckets}vllm:time_to_first_token_seconds_bucket{{le="+Inf"}} {len(ttft)}\n'
            f"vllm:time_to_first_token_seconds_count {len(ttft)}\nvllm:time_to_first_token_seconds_sum {sum(ttft)}\n"
            + extra)


class Script:
    """Answers each URL with the next text of its script (an exception is raised instead)."""

    def __init__(self, scripts: dict[str, list[str | Exception]]) -> None:
        self.scripts = scripts

    async def __call__(self, url: str, *, timeout_s: float) -> str:
        answer = self.scripts[url].pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000_000_000

    def __call__(self) -> int:
        self.now += 100_000_000  # 0.1 s per reading
        return self.now


async def test_phases_are_bounded_by_their_rounds_and_failures_are_recorded(tmp_path: Path) -> None:
    texts: list[str | Exception] = [
        _text(100, 0, [0.01]),                                # baseline
        _text(110, 2, [0.01, 0.03]),                          # during warmup
        _text(120, 1, [0.01, 0.03, 0.03]),                    # warmup's end round
        _text(150, 4, [0.01, 0.03, 0.03, 0.05]),              # during profiling
        _text(20, 3, [0.05, 0.05],                            # the server restarted
              extra='# TYPE vllm:request_success_total counter\nvllm:request_success_total{finished_reason="stop"} 2\n'),
        _text(40, 0, [0.05, 0.05, 0.05, 0.05],
              extra='# TYPE vllm:request_success_total counter\nvllm:request_success_total{finished_reason="stop"} 4\n'),
    ]
    texts.append(texts[-1])                                   # the final round
    fetch = Script({A: texts, B: [FetchError("HTTP 404")] * 7})
    collector = ServerMetricsCollector(endpoints=[A, B, A], fetch=fetch, interval_s=1, wall_ns=Clock())
    await collector.scrape()
    collector.phase_started("warmup")
    await collector.scrape()
    await collector.phase_ended("warmup")
    collector.phase_started("profiling")
    await collector.scrape()
    await collector.scrape()
    await collector.phase_ended("profiling")
    await collector.finish()
    assert collector.phases["warmup"].start_round == 0 and collector.phases["warmup"].end_round == 2
    assert collector.phases["profiling"].start_round == 2 and collector.phases["profiling"].end_round == 5

    doc = build_export(collector, profiling="profiling", warmup="warmup", benchmark_id="b1")
    assert list(doc) == ["schema_version", "aiperf_version", "benchmark_id", "summary", "metrics",
                         "warmup_metrics", "endpoint_errors"]
    assert doc["schema_version"] == "1.1"
    assert doc["summary"]["endpoints_configured"] == [A, B] and doc["summary"]["endpoints_successful"] == [A]
    assert doc["summary"]["endpoint_info"][B]["failed_fetches"] == 7 and doc["endpoint_errors"] == {B: "HTTP 404"}

    def series(section: str, name: str) -> dict:  # type: ignore[type-arg]
        (one,) = doc[section][name]["series"]
        return one  # type: ignore[no-any-return]

    assert series("warmup_metrics", "vllm:generation_tokens")["stats"]["total"] == 20
    tokens = series("metrics", "vllm:generation_tokens")
    assert tokens["endpoint_url"] == A and tokens["labels"] == {"model_name": "m"}
    assert tokens["stats"]["total"] == 30 + 20 + 20  # 120 -> 150, restart to 20, -> 40
    assert doc["metrics"]["vllm:generation_tokens"]["unit"] == "tokens"
    assert series("metrics", "vllm:request_success")["stats"]["total"] == 4  # appeared mid-phase: from 0
    gauge = series("metrics", "vllm:num_requests_running")["stats"]
    assert (gauge["min"], gauge["max"], gauge["p50"]) == (0, 4, 2)
    ttft = series("metrics", "vllm:time_to_first_token_seconds")
    assert ttft["stats"]["count"] == 1 + 4 and ttft["buckets"]["0.06"] == 5 and ttft["buckets"]["0.04"] == 0
    assert ttft["stats"]["p50_estimate"] == pytest.approx(0.05)
    assert doc["metrics"]["vllm:time_to_first_token_seconds"]["type"] == "histogram"

    files = write_exports(doc, tmp_path)
    assert json.loads((tmp_path / files[0]).read_text()) == doc
    rows = list(csv.reader(io.StringIO((tmp_path / files[1]).read_text())))
    assert rows[0] == ["Endpoint", "Type", "Metric", "Unit", "total", "rate", "rate_avg", "rate_min", "rate_max",
                       "rate_std", "Description"]
    assert ["a:8000", "counter", 'vllm:generation_tokens{model_name="m"}', "tokens", "70.0"] == rows[1][:5]
    assert [] in rows  # sections are separated by a blank line
    assert any(r[:2] == ["Endpoint", "Type"] and "p99_estimate" in r for r in rows)


async def test_a_phase_never_ended_closes_on_the_last_round() -> None:
    fetch = Script({A: [_text(0, 0, []), _text(5, 1, [0.03]), _text(9, 0, [0.03, 0.03])]})
    collector = ServerMetricsCollector(endpoints=[A], fetch=fetch, interval_s=1, wall_ns=Clock())
    await collector.scrape()
    collector.phase_started("profiling")
    await collector.scrape()
    await collector.finish()
    doc = build_export(collector, profiling="profiling")
    assert doc["metrics"]["vllm:generation_tokens"]["series"][0]["stats"]["total"] == 9
    assert "warmup_metrics" not in doc and doc["endpoint_errors"] == {}


async def test_a_phase_whose_boundary_scrapes_time_out_keeps_its_start_and_end() -> None:
    """A loaded server: the round answered last before the phase began had timed out, and so did
    the phase's first end round; the phase counts from the answer before it to the retried end."""
    fetch = Script({A: [_text(100, 0, []), TimeoutError(), _text(150, 1, [0.03]), TimeoutError(),
                        _text(160, 0, [0.03]), _text(160, 0, [0.03])]})
    collector = ServerMetricsCollector(endpoints=[A], fetch=fetch, interval_s=1, wall_ns=Clock())
    await collector.scrape()
    await collector.scrape()  # timed out: the phase's start round, with no answer
    collector.phase_started("profiling")
    await collector.scrape()
    await collector.phase_ended("profiling")
    await collector.finish()
    assert collector.phases["profiling"].start_round == 1 and collector.phases["profiling"].end_round == 4
    doc = build_export(collector, profiling="profiling")
    assert doc["metrics"]["vllm:generation_tokens"]["series"][0]["stats"]["total"] == 60


async def test_an_end_whose_every_attempt_fails_falls_forward_to_the_next_answer() -> None:
    """The podman tier's flake (2026-12-06): the mock's /metrics could not be fetched around the
    profiling phase's end (each end attempt refused: a DNS lookup during a reload), so the window
    held only its start and summed 0 tokens. The end attempts are `retry_s` apart, and a window
    whose end round failed ends at the next round the endpoint answered (`finish`'s)."""
    refused = OSError("[Errno -3] Temporary failure in name resolution")
    fetch = Script({A: [_text(100, 0, []), refused, refused, refused, refused, _text(740, 0, [0.03])]})
    collector = ServerMetricsCollector(endpoints=[A], fetch=fetch, interval_s=1, wall_ns=Clock(), retry_s=0.01)
    await collector.scrape()
    collector.phase_started("profiling")
    await collector.scrape()  # during the phase: refused
    await collector.phase_ended("profiling")  # three attempts, all refused
    assert collector.phases["profiling"].end_round == 4
    await collector.finish()
    doc = build_export(collector, profiling="profiling")
    assert doc["metrics"]["vllm:generation_tokens"]["series"][0]["stats"]["total"] == 640
    assert doc["summary"]["endpoint_info"][A]["failed_fetches"] == 4


async def test_a_phase_start_heard_late_counts_from_the_phase_s_own_start() -> None:
    """PhaseStarted handled after the phase's first scrapes (a loaded host): the window starts at
    the last round answered before the wall-clock time the timing-manager stamped, not before
    the collector heard of it."""
    clock = Clock()
    fetch = Script({A: [_text(100, 0, []), _text(400, 1, [0.03]), _text(740, 0, [0.03]), _text(740, 0, [0.03])]})
    collector = ServerMetricsCollector(endpoints=[A], fetch=fetch, interval_s=1, wall_ns=clock, retry_s=0)
    await collector.scrape()  # before the phase
    began = clock.now + 1
    await collector.scrape()  # the phase has begun: 300 tokens in
    collector.phase_started("profiling", at_ns=began)
    assert collector.phases["profiling"].start_round == 0
    await collector.phase_ended("profiling")
    await collector.finish()
    doc = build_export(collector, profiling="profiling")
    assert doc["metrics"]["vllm:generation_tokens"]["series"][0]["stats"]["total"] == 640


def _export(metrics: dict) -> dict:  # type: ignore[type-arg]
    return {"summary": {"endpoints_configured": [A], "endpoints_successful": [A]}, "metrics": metrics}


def _metric(n_series: int, labels: int = 1, value: float = 1.0) -> dict:  # type: ignore[type-arg]
    return {"type": "gauge", "unit": None, "description": "d", "series": [
        {"endpoint_url": A, "labels": {f"l{j}": str(i) for j in range(labels)},
         "stats": {"avg": value, "max": value, "p50": value, "std": 0.0}} for i in range(n_series)]}


def test_projection_keeps_the_allow_list_and_the_projected_stats_only() -> None:
    out = project_for_cr(_export({"vllm:num_requests_running": _metric(2), "other_metric": _metric(1)}))
    assert set(out) == {"summary", "metrics"} and list(out["metrics"]) == ["vllm:num_requests_running"]
    assert out["metrics"]["vllm:num_requests_running"]["series"][0] == {
        "endpoint_url": A, "labels": {"l0": "0"}, "stats": {"avg": 1.0, "max": 1.0}}
    assert "vllm:num_requests_running" in CURATED_METRIC_NAMES


def test_projection_drops_a_metric_over_the_series_or_label_cap_whole() -> None:
    limits = ProjectionLimits(max_series=3, max_labels=2)
    out = project_for_cr(_export({"vllm:num_requests_running": _metric(4), "vllm:num_requests_waiting": _metric(1, 3),
                                  "vllm:gpu_cache_usage_perc": _metric(3, 2)}), limits)
    assert list(out["metrics"]) == ["vllm:gpu_cache_usage_perc"]
    assert len(out["metrics"]["vllm:gpu_cache_usage_perc"]["series"]) == 3


def test_projection_over_the_byte_budget_carries_the_marker_and_no_metrics() -> None:
    big = _export({"vllm:num_requests_running": _metric(200)})
    out = project_for_cr(big, ProjectionLimits(max_bytes=2000))
    assert out["metrics"] == {} and out["projection_dropped"] is True
    assert "too large" in out["projection_message"] and out["summary"]["endpoints_configured"] == [A]
    tiny = project_for_cr(big, ProjectionLimits(max_bytes=200))
    assert "summary" not in tiny and tiny["projection_dropped"] is True
    assert len(json.dumps(out)) <= 2000


def test_projection_scrubs_non_finite_values() -> None:
    out = project_for_cr(_export({"vllm:num_requests_running": _metric(1, value=math.nan),
                                  "vllm:gpu_cache_usage_perc": _metric(1, value=math.inf)}))
    stats = [s["stats"] for m in out["metrics"].values() for s in m["series"]]
    assert stats == [{"avg": None, "max": None}, {"avg": None, "max": None}]
    json.dumps(out, allow_nan=False)


def test_limits_from_env_override_and_reject_bad_values() -> None:
    limits = ProjectionLimits.from_env({"AIPERF_SERVER_METRICS_CR_PROJECTION_MAX_SERIES": "9",
                                        "AIPERF_SERVER_METRICS_CR_PROJECTION_MAX_BYTES": "lots"})
    assert limits == ProjectionLimits(max_series=9)
