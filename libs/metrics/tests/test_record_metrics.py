"""compute_metrics: exact values from hand-built records."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from aiperf.endpoints import EndpointType, parse_response
from aiperf.messages import ErrorDetails, MetricRecord, RequestRecord
from aiperf.metrics import compute_metrics

MS = 1_000_000


def words(text: str) -> int:
    return len(text.split())


def _metrics(record: RequestRecord, streaming: bool = True, server: bool = False) -> MetricRecord:
    parsed = parse_response(EndpointType.CHAT, streaming, record)
    return compute_metrics(record, parsed, count_tokens=words, processor_id="rp_1",
                           use_server_token_count=server)


def test_streaming_timings_exact(make_record: Callable[..., RequestRecord]) -> None:
    m = _metrics(make_record(5, first_ms=40, gap_ms=8)).metrics
    assert m["time_to_first_token"] == 40 * MS
    assert m["time_to_second_token"] == 8 * MS
    assert m["time_to_first_output_token"] == 40 * MS
    assert m["request_latency"] == 72 * MS
    assert m["decode_duration"] == 32 * MS
    assert m["inter_chunk_latency"] == [8.0 * MS] * 4
    assert m["output_sequence_length"] == 5 and m["output_token_count"] == 5
    assert m["input_sequence_length"] == 100
    assert m["inter_token_latency"] == 8 * MS
    assert m["output_token_throughput_per_user"] == pytest.approx(125.0)
    assert m["e2e_output_token_throughput"] == pytest.approx(5 / 0.072)
    assert m["prefill_throughput_per_user"] == pytest.approx(100 / 0.040)
    assert "reasoning_token_count" not in m and "usage_prompt_tokens" not in m


def test_single_token_has_no_itl(make_record: Callable[..., RequestRecord]) -> None:
    m = _metrics(make_record(1)).metrics
    assert m["time_to_first_token"] == 40 * MS and m["request_latency"] == 40 * MS
    assert "inter_token_latency" not in m and "time_to_second_token" not in m
    assert "inter_chunk_latency" not in m and "output_token_throughput_per_user" not in m


def test_usage_and_server_token_count(make_record: Callable[..., RequestRecord],
                                      chat_chunks: Callable[..., list[bytes]]) -> None:
    usage = {"prompt_tokens": 90, "completion_tokens": 7, "total_tokens": 97}
    rec = make_record(3, chunks=chat_chunks(["a ", "b ", "c "], usage))
    client = _metrics(rec).metrics
    assert client["output_sequence_length"] == 3 and client["input_sequence_length"] == 100
    assert client["usage_prompt_tokens"] == 90 and client["usage_completion_tokens"] == 7
    server = _metrics(rec, server=True).metrics
    assert server["output_sequence_length"] == 7 and server["input_sequence_length"] == 90
    assert server["inter_token_latency"] == pytest.approx(16 * MS / 6)
    no_isl = _metrics(make_record(3, chunks=chat_chunks(["a ", "b ", "c "], usage), input_tokens=None))
    assert no_isl.metrics["input_sequence_length"] == 90


def test_reasoning_counts_separately_and_ttfo(make_record: Callable[..., RequestRecord]) -> None:
    import orjson
    def chunk(**delta: str) -> bytes:
        obj = {"object": "chat.completion.chunk", "choices": [{"delta": delta}]}
        return b"data: " + orjson.dumps(obj) + b"\n\n"
    chunks = [chunk(reasoning_content="think hard "), chunk(content="ans "), chunk(content="wer")]
    m = _metrics(make_record(3, chunks=chunks)).metrics
    assert m["time_to_first_token"] == 40 * MS
    assert m["time_to_first_output_token"] == 48 * MS
    assert m["reasoning_token_count"] == 2 and m["output_token_count"] == 2
    assert m["output_sequence_length"] == 4


def test_non_streaming_has_latency_only(make_record: Callable[..., RequestRecord]) -> None:
    import orjson
    body = orjson.dumps({"object": "chat.completion", "choices": [{"message": {"content": "a b c"}}]})
    rec = make_record(1, streaming=False, chunks=[body], chunk_ns=[1_000 * MS + 90 * MS],
                           end_ns=1_000 * MS + 95 * MS)
    m = _metrics(rec, streaming=False).metrics
    assert m["request_latency"] == 95 * MS
    assert m["output_sequence_length"] == 3
    assert "time_to_first_token" not in m and "inter_token_latency" not in m


def test_accounting_extras_with_clock_offset(make_record: Callable[..., RequestRecord]) -> None:
    start = 1_000 * MS
    rec = make_record(2, credit_issued_ns=start - 5 * MS - 777, clock_offset_ns=777,
                           scheduled_ns=start - 3 * MS - 777, credit_received_ns=start - 1 * MS)
    m = _metrics(rec).metrics
    assert m["credit_to_start_latency"] == 5 * MS
    assert m["credit_to_send_delay"] == 1 * MS
    assert m["schedule_lag"] == 3 * MS
    latency = m["request_latency"]
    assert isinstance(latency, int | float)
    assert m["co_aware_request_latency"] == 3 * MS + latency
    assert m["effective_latency"] == 5 * MS + latency
    unscheduled = _metrics(make_record(2, credit_issued_ns=start - 5 * MS)).metrics
    assert "schedule_lag" not in unscheduled
    assert unscheduled["co_aware_request_latency"] == unscheduled["effective_latency"]


def test_metadata_and_wall_times(make_record: Callable[..., RequestRecord]) -> None:
    rec = make_record(2, response_headers_ns=1_000 * MS + 10 * MS, turn_index=2, credit_num=7)
    out = _metrics(rec)
    md = out.metadata
    assert md["request_start_ns"] == rec.start_wall_ns
    assert md["request_ack_ns"] == rec.start_wall_ns + 10 * MS
    assert md["request_end_ns"] == rec.start_wall_ns + (rec.end_ns - rec.start_ns)
    assert md["x_request_id"] == "rid" and md["session_num"] == 7 and md["turn_index"] == 2
    assert md["worker_id"] == "worker_1" and md["record_processor_id"] == "rp_1"
    assert md["benchmark_phase"] == "profiling" and md["was_cancelled"] is False
    assert out.end_wall_ns == md["request_end_ns"] and out.processor_id == "rp_1"


def test_error_record_carries_only_error_isl(make_record: Callable[..., RequestRecord]) -> None:
    rec = make_record(1, status=500, chunks=[b'{"error": {"message": "boom"}}'])
    out = _metrics(rec)
    assert out.error == ErrorDetails(type="Internal Server Error", message="boom", code=500)
    assert out.metrics == {"error_isl": 100}


def test_only_an_error_inside_a_succeeded_exchange_is_a_response_error(
        make_record: Callable[..., RequestRecord]) -> None:
    empty = _metrics(make_record(1, chunks=[b"data: [DONE]\n\n"]))
    assert empty.error is not None and empty.error.type == "InvalidInferenceResultError"
    assert empty.response_error  # the worker returned it as ok: the accounting must move it
    in_stream = _metrics(make_record(1, chunks=[b'data: {"error": {"message": "x", "type": "Overloaded"}}\n\n']))
    assert in_stream.error is not None and in_stream.response_error
    assert not _metrics(make_record(1, status=500, chunks=[b"{}"])).response_error  # failed already
    cut = make_record(1, error=ErrorDetails(type="ClientPayloadError", message="cut"))
    assert not _metrics(cut).response_error
    assert not _metrics(make_record(2, cancelled=True)).response_error
    assert not _metrics(make_record(1)).response_error


def test_cancelled_record(make_record: Callable[..., RequestRecord]) -> None:
    out = _metrics(make_record(2, cancelled=True, input_tokens=None))
    assert out.cancelled and out.metrics == {} and out.metadata["was_cancelled"] is True
    assert out.error is not None and out.error.type == "RequestCancellationError"


def test_the_model_accepts_exactly_the_per_request_metrics_as_slos() -> None:
    from aiperf.config.benchmark import GOODPUT_METRICS
    from aiperf.metrics import RECORD_METRICS

    assert sorted(GOODPUT_METRICS) == sorted(spec.tag for spec in RECORD_METRICS)


def test_http_trace_phases_of_a_fresh_connection(make_record: Callable[..., RequestRecord]) -> None:
    from aiperf.messages import HttpTrace

    t0 = 1_000 * MS
    trace = HttpTrace(pool_wait_start_ns=t0, pool_wait_end_ns=t0 + 1 * MS, dns_start_ns=t0 + 1 * MS,
                      dns_end_ns=t0 + 3 * MS, connect_start_ns=t0 + 1 * MS, connected_ns=t0 + 7 * MS,
                      send_start_ns=t0 + 8 * MS, send_end_ns=t0 + 9 * MS, recv_first_ns=t0 + 39 * MS,
                      recv_last_ns=t0 + 80 * MS, sent_bytes=420, recv_bytes=4317, writes=2, reads=20)
    m = _metrics(make_record(5, http=trace)).metrics
    assert m["http_req_blocked"] == 1 * MS
    assert m["http_req_dns_lookup"] == 2 * MS
    assert m["http_req_connecting"] == 4 * MS  # after DNS, to the handshake's end
    assert m["http_req_sending"] == 1 * MS
    assert m["http_req_waiting"] == 30 * MS
    assert m["http_req_receiving"] == 41 * MS
    assert m["http_req_duration"] == 72 * MS
    assert m["http_req_connection_overhead"] == 7 * MS
    assert m["http_req_total"] == (7 + 1 + 30 + 41) * MS
    assert m["http_req_data_sent"] == 420 and m["http_req_data_received"] == 4317
    assert m["http_req_chunks_sent"] == 2 and m["http_req_chunks_received"] == 20
    assert m["http_req_connection_reused"] == 0


def test_http_trace_of_a_reused_connection_and_its_jsonl_units(
        make_record: Callable[..., RequestRecord]) -> None:
    from aiperf.messages import HttpTrace
    from aiperf.metrics import record_json

    t0 = 1_000 * MS
    trace = HttpTrace(reused=True, connected_ns=1, dns_start_ns=1, dns_end_ns=2, send_start_ns=t0,
                      send_end_ns=t0, recv_first_ns=t0 + 5 * MS, recv_last_ns=t0 + 5 * MS, sent_bytes=1024,
                      recv_bytes=512, writes=1, reads=1)
    rec = _metrics(make_record(2, http=trace))
    m = rec.metrics
    assert m["http_req_dns_lookup"] == 0 and m["http_req_connecting"] == 0 and m["http_req_blocked"] == 0
    assert m["http_req_connection_reused"] == 1 and m["http_req_receiving"] == 0
    assert m["http_req_total"] == m["http_req_duration"] == 5 * MS
    shown = record_json(rec)["metrics"]
    assert shown["http_req_data_sent"] == {"value": 1.0, "unit": "KB"}
    assert shown["http_req_data_received"] == {"value": 0.5, "unit": "KB"}
    assert shown["http_req_waiting"] == {"value": 5.0, "unit": "ms"}
    assert shown["http_req_connection_reused"] == {"value": 1, "unit": "ratio"}
    assert shown["http_req_chunks_received"] == {"value": 1, "unit": "count"}
    # failed requests carry no trace metrics (AIPerf computes record metrics for successes only)
    bad = _metrics(make_record(1, status=500, chunks=[b"boom"], http=trace))
    assert not any(tag.startswith("http_req_") for tag in bad.metrics)


def test_osl_mismatch_diff_is_signed_and_requested_osl_stays_internal(
        make_record: Callable[..., RequestRecord]) -> None:
    from aiperf.metrics import record_json

    short = _metrics(make_record(5, requested_output_tokens=10))
    assert short.metrics["osl_mismatch_diff_pct"] == -50.0 and short.metrics["requested_osl"] == 10
    assert "requested_osl" not in record_json(short)["metrics"]
    assert record_json(short)["metrics"]["osl_mismatch_diff_pct"] == {"value": -50.0, "unit": "%"}
    assert _metrics(make_record(6, requested_output_tokens=5)).metrics["osl_mismatch_diff_pct"] == 20.0
    assert "osl_mismatch_diff_pct" not in _metrics(make_record(5)).metrics
    assert "osl_mismatch_diff_pct" not in _metrics(make_record(5, requested_output_tokens=0)).metrics
