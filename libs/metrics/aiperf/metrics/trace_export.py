"""The `trace_data` of a `profile_export.jsonl` line (`artifacts.trace`, `--export-http-trace`):
one request's HTTP trace in AIPerf 0.13's export shape (its `AioHttpTraceDataExport`), every
timestamp in wall-clock ns (`time.time_ns()`), with the k6/HAR durations it computes.

From the worker's `HttpTrace` and the record's response reads. Differences, by design: the
request headers are not written (they carry the API key and user headers, secrets never written
to disk), nor the response headers (the worker does not keep them), nor the socket addresses;
a request's writes are given as one chunk (its first write, with all its bytes), since the
worker counts writes but stamps only the first and last.
"""

from __future__ import annotations

from typing import Any

from aiperf.messages import RequestRecord

__all__ = ["trace_data"]


def trace_data(record: RequestRecord) -> dict[str, Any] | None:
    """AIPerf's `trace_data` of `record`, or None when the worker has no trace of it (the
    request never left, or its client does not trace)."""
    http = record.http
    if http is None:
        return None
    shift = record.start_wall_ns - record.start_ns

    def wall(perf_ns: int) -> int | None:
        return perf_ns + shift if perf_ns else None

    sizes = [len(c) for c in record.chunks]
    response_chunks = [[ns + shift, size] for ns, size in zip(record.chunk_ns, sizes, strict=False)]
    send_start, send_end = wall(http.send_start_ns), wall(http.send_end_ns)
    recv_start = wall(http.recv_first_ns)
    recv_end = wall(http.recv_last_ns)
    headers_at = wall(record.response_headers_ns)
    pool_start, pool_end = wall(http.pool_wait_start_ns), wall(http.pool_wait_end_ns)
    dns_start, dns_end = wall(http.dns_start_ns), wall(http.dns_end_ns)
    connect_start, connect_end = wall(http.connect_start_ns), wall(http.connected_ns)
    chunks = len(response_chunks)
    out: dict[str, Any] = {
        "trace_type": "aiohttp",
        "request_send_start_ns": send_start,
        "request_headers": None,
        "request_headers_sent_ns": send_start,
        "request_chunks": [[send_start, http.sent_bytes]] if send_start is not None else [],
        "request_send_end_ns": send_end,
        "request_chunks_count": 1 if send_start is not None else 0,
        "request_bytes_total": http.sent_bytes,
        "response_status_code": record.status or None,
        "response_reason": None,
        "response_receive_start_ns": recv_start,
        "response_headers": None,
        "response_headers_received_ns": headers_at,
        "response_chunks": response_chunks,
        "response_chunks_count": chunks,
        "response_bytes_total": sum(sizes),
        "response_receive_end_ns": recv_end,
        "error_timestamp_ns": wall(record.end_ns) if record.error is not None else None,
        "connection_pool_wait_start_ns": pool_start,
        "connection_pool_wait_end_ns": pool_end,
        "tcp_connect_start_ns": connect_start,
        "tcp_connect_end_ns": connect_end,
        "connection_reused_ns": send_start if http.reused else None,
        "dns_cache_hit_ns": None,
        "dns_cache_miss_ns": dns_start,
        "dns_lookup_start_ns": dns_start,
        "dns_lookup_end_ns": dns_end,
        "local_ip": None,
        "local_port": None,
        "remote_ip": None,
        "remote_port": None,
        "sending_ns": _span(send_start, send_end),
        "waiting_ns": _span(send_end, recv_start),
        "receiving_ns": None if chunks == 0 else 0 if chunks == 1 else _span(recv_start, recv_end),
        "duration_ns": _span(send_start, recv_end),
        "blocked_ns": _span(pool_start, pool_end),
        "dns_lookup_ns": _span(dns_start, dns_end),
        "connecting_ns": _span(connect_start, connect_end),
    }
    return out


def _span(start: int | None, end: int | None) -> int | None:
    return end - start if start and end else None
