"""Columnar aggregation: values kept in typed arrays, exact whatever their kind, and the
memory per added request bounded (issue 13: <= 0.5 KiB for a 64-token streamed request)."""

from __future__ import annotations

import math
import tracemalloc

import msgspec
import numpy as np
from conftest import streaming_record, words

from aiperf.endpoints import EndpointType, parse_response
from aiperf.messages import HttpTrace
from aiperf.metrics import Aggregator, compute_metrics
from aiperf.metrics.columns import Column


def test_a_column_is_exact_in_both_widths() -> None:
    col = Column()
    col.append(3.0)
    col.extend([4.0, 4294967295.0])
    col.append(7)
    assert col.data.itemsize == 4  # typecode "I"
    assert col.values().tolist() == [3.0, 4.0, 4294967295.0, 7.0]
    col.extend([0.25, 1e12])  # not whole / out of range: widened, earlier values unchanged
    col.append(-2.0)
    col.pad(9)
    assert col.data.typecode == "d"
    got = col.values()
    assert got[:7].tolist() == [3.0, 4.0, 4294967295.0, 7.0, 0.25, 1e12, -2.0] and np.isnan(got[7:]).all()
    for first in (math.nan, 2.0**32, -1.0, 0.5):
        c = Column()
        c.append(first)
        assert c.data.typecode == "d" and (c.values()[0] == first or math.isnan(first))


def test_percentiles_match_plain_float64_lists() -> None:
    rng = np.random.default_rng(1)
    ints = rng.integers(0, 5_000_000_000, 999).astype(float)  # some beyond 2^32: widens midway
    col = Column()
    for v in ints:
        col.append(float(v))
    assert np.array_equal(np.percentile(col.values(), [1, 50, 99]), np.percentile(ints, [1, 50, 99]))


def test_memory_per_added_streamed_request_is_under_half_a_kib() -> None:
    t0 = 1_000_000_000  # the record's start_ns
    trace = HttpTrace(reused=True, send_start_ns=t0 + 10_000, send_end_ns=t0 + 30_000, recv_first_ns=t0 + 39_000_000,
                      recv_last_ns=t0 + 545_000_000, sent_bytes=700, recv_bytes=9000, writes=1, reads=64)
    record = streaming_record(64, first_ms=40, gap_ms=8, http=trace, credit_issued_ns=t0 - 200_000,
                              credit_received_ns=t0 - 100_000, requested_output_tokens=64)
    metrics = compute_metrics(record, parse_response(EndpointType.CHAT, True, record), count_tokens=words)
    icl = metrics.metrics["inter_chunk_latency"]
    assert isinstance(icl, list) and len(icl) == 63 and len(metrics.metrics) >= 25, metrics.metrics
    copies = [msgspec.structs.replace(metrics, credit_num=i) for i in range(3000)]
    tracemalloc.start()  # before the columns exist: their growth is then counted net
    try:
        agg = Aggregator()
        for r in copies[:1000]:  # the first ones set up the columns
            agg.add(r)
        before = tracemalloc.get_traced_memory()[0]
        for r in copies[1000:]:
            agg.add(r)
        per_request = (tracemalloc.get_traced_memory()[0] - before) / 2000
    finally:
        tracemalloc.stop()
    assert per_request <= 512, per_request
    assert agg.summary(benchmark_duration_s=1.0).metrics["inter_token_latency"].count == 3000
