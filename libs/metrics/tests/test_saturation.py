"""The client-saturation verdict from workers' `ClientLoad`s: lag percentiles from the
histogram, thresholds, and the console line."""

from __future__ import annotations

from aiperf.messages import LAG_BUCKETS, ClientLoad, lag_bucket, lag_bucket_upper_ns
from aiperf.metrics import client_saturation, saturation_line

MS = 1_000_000


def _load(lags_ns: list[int], *, cpu: float) -> ClientLoad:
    counts = [0] * LAG_BUCKETS
    for lag in lags_ns:
        counts[lag_bucket(lag)] += 1
    wall = 10 * MS * len(lags_ns)
    return ClientLoad(interval_ns=10 * MS, ticks=len(lags_ns), lag_counts=counts, lag_max_ns=max(lags_ns),
                      busy_wall_ns=wall, busy_cpu_ns=round(cpu * wall), cpu_max_window=cpu)


def test_buckets_bound_the_lag_within_a_fifth() -> None:
    for lag in (0, 15_999, 16_000, 100_000, MS, 7 * MS, 250 * MS, 10**12):
        i = lag_bucket(lag)
        assert 0 <= i < LAG_BUCKETS
        assert lag < lag_bucket_upper_ns(i) or i == LAG_BUCKETS - 1
        if i:
            assert lag_bucket_upper_ns(i) <= 1.19 * max(lag, 16_000) + 1


def test_percentiles_from_the_histogram() -> None:
    load = _load([MS // 2] * 98 + [30 * MS, 40 * MS], cpu=0.3)
    assert 0.5 * MS <= load.lag_percentile_ns(50) <= 0.6 * MS
    assert 30 * MS <= load.lag_percentile_ns(99) <= 36 * MS
    assert load.lag_percentile_ns(100) == 40 * MS
    assert ClientLoad(interval_ns=1).lag_percentile_ns(99) == 0.0


def test_verdict_names_the_saturated_workers_and_why() -> None:
    calm = _load([MS] * 100, cpu=0.4)
    laggy = _load([MS] * 90 + [50 * MS] * 10, cpu=0.5)
    busy = _load([MS] * 100, cpu=0.97)
    verdict = client_saturation({"worker-a": calm, "worker-b": laggy, "worker-c": busy})
    assert verdict["saturated"] is True
    assert [r.split(":")[0] for r in verdict["reasons"]] == ["worker-b", "worker-c"]
    assert "lag p99" in verdict["reasons"][0] and "CPU 97%" in verdict["reasons"][1]
    assert verdict["workers"]["worker-a"]["cpu_mean"] == 0.4
    assert saturation_line(verdict).startswith("CLIENT SATURATED")

    fine = client_saturation({"worker-a": calm})
    assert fine["saturated"] is False and fine["reasons"] == []
    assert saturation_line(fine).startswith("client not saturated (worst worker: loop lag p99 1.")
    assert client_saturation({})["saturated"] is None and saturation_line(client_saturation({})) == ""
