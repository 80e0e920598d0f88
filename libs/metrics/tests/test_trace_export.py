"""`trace_data` (`--export-http-trace`): one request's HTTP trace in AIPerf 0.13's export shape,
wall-clock, with its k6/HAR durations; and the `--show-trace-timing` console table."""

from __future__ import annotations

import msgspec

from aiperf.messages import HttpTrace, MetricRecord, Phase
from aiperf.metrics import record_json
from aiperf.metrics.aggregate import Aggregator
from aiperf.metrics.console import TRACE_TITLE, render_console_tables
from aiperf.metrics.trace_export import trace_data
from tests.conftest import streaming_record

MS = 1_000_000
WALL = 1_700_000_000_000_000_000
START = 1_000 * MS  # the record's perf start (its wall start is WALL)

# AIPerf 0.13.0's AioHttpTraceDataExport fields, computed durations included
AIPERF_FIELDS = {
    "trace_type", "request_send_start_ns", "request_headers", "request_headers_sent_ns", "request_chunks",
    "request_send_end_ns", "request_chunks_count", "request_bytes_total", "response_status_code",
    "response_reason", "response_receive_start_ns", "response_headers", "response_headers_received_ns",
    "response_chunks", "response_chunks_count", "response_bytes_total", "response_receive_end_ns",
    "error_timestamp_ns", "connection_pool_wait_start_ns", "connection_pool_wait_end_ns", "tcp_connect_start_ns",
    "tcp_connect_end_ns", "connection_reused_ns", "dns_cache_hit_ns", "dns_cache_miss_ns", "dns_lookup_start_ns",
    "dns_lookup_end_ns", "local_ip", "local_port", "remote_ip", "remote_port", "sending_ns", "waiting_ns",
    "receiving_ns", "duration_ns", "blocked_ns", "dns_lookup_ns", "connecting_ns",
}


def test_a_fresh_connection_in_wall_clock_with_aiperfs_durations() -> None:
    http = HttpTrace(dns_start_ns=START + 1 * MS, dns_end_ns=START + 2 * MS, connect_start_ns=START + 2 * MS,
                     connected_ns=START + 5 * MS, send_start_ns=START + 6 * MS, send_end_ns=START + 7 * MS,
                     recv_first_ns=START + 20 * MS, recv_last_ns=START + 80 * MS, sent_bytes=300, writes=2)
    record = streaming_record(3, http=http, response_headers_ns=START + 20 * MS)
    data = trace_data(record)
    assert data is not None and set(data) == AIPERF_FIELDS
    assert data["trace_type"] == "aiohttp" and data["response_status_code"] == 200
    assert data["request_send_start_ns"] == WALL + 6 * MS and data["request_send_end_ns"] == WALL + 7 * MS
    assert data["request_chunks"] == [[WALL + 6 * MS, 300]] and data["request_bytes_total"] == 300
    assert [ts for ts, _ in data["response_chunks"]] == [WALL + (ns - START) for ns in record.chunk_ns]
    assert data["response_bytes_total"] == sum(len(c) for c in record.chunks) == sum(
        size for _, size in data["response_chunks"])
    assert (data["dns_lookup_ns"], data["connecting_ns"], data["sending_ns"]) == (1 * MS, 3 * MS, 1 * MS)
    assert (data["waiting_ns"], data["receiving_ns"], data["duration_ns"]) == (13 * MS, 60 * MS, 74 * MS)
    assert data["blocked_ns"] is None and data["connection_reused_ns"] is None
    assert data["request_headers"] is None  # secrets (API key, user headers) are never written


def test_a_reused_connection_and_no_trace_without_one() -> None:
    http = HttpTrace(reused=True, send_start_ns=START, send_end_ns=START, recv_first_ns=START + 5 * MS,
                     recv_last_ns=START + 5 * MS)
    data = trace_data(streaming_record(1, http=http))
    assert data is not None and data["connection_reused_ns"] == WALL and data["receiving_ns"] == 0
    assert data["tcp_connect_start_ns"] is None and data["connecting_ns"] is None
    assert trace_data(streaming_record(1)) is None


def test_the_jsonl_line_carries_it_between_metrics_and_error() -> None:
    record = MetricRecord(phase=Phase.PROFILING, credit_num=0, worker_id="w", conversation_id="c",
                          trace_data={"trace_type": "aiohttp"})
    assert list(record_json(record)) == ["metadata", "metrics", "trace_data"]
    assert "trace_data" not in record_json(msgspec.structs.replace(record, trace_data=None))


def test_the_trace_timing_table_is_printed_only_when_asked_for() -> None:
    aggregator = Aggregator()
    aggregator.add(MetricRecord(phase=Phase.PROFILING, credit_num=0, worker_id="w", conversation_id="c",
                                metrics={"request_latency": 5.0 * MS, "http_req_waiting": 2.0 * MS}))
    summary = aggregator.summary(benchmark_duration_s=1.0)
    assert [t.title for t in render_console_tables(summary)] == ["aiperf | LLM Metrics"]
    assert [t.title for t in render_console_tables(summary, trace_timing=True)][-1] == TRACE_TITLE
