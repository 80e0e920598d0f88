"""Per-request metrics: one `RequestRecord` + its parse -> one `MetricRecord`.

Definitions follow AIPerf 0.13 (ns unless noted; "content response" = a response with text or
reasoning, see `aiperf.endpoints.ParsedResponse`):

- time_to_first_token = first content response - start_ns (streamed requests only)
- time_to_second_token = second content response - first content response
- time_to_first_output_token = first response with answer (non-reasoning) text - start_ns
- request_latency = last content response - start_ns (last response of any kind if none)
- inter_chunk_latency = gaps between consecutive content responses (a list)
- decode_duration = request_latency - time_to_first_token
- inter_token_latency = decode_duration / (OSL - 1), only when OSL >= 2
- output_token_throughput_per_user = 1e9 / inter_token_latency (tokens/s)
- e2e_output_token_throughput = OSL / request_latency (tokens/s)
- prefill_throughput_per_user = ISL / time_to_first_token (tokens/s)
- output_token_count / reasoning_token_count = client tokenizer on the answer / reasoning text;
  output_sequence_length = their sum. With `use_server_token_count`: the server's
  usage.completion_tokens (reasoning from usage.completion_tokens_details).
- input_sequence_length = `record.input_tokens` (the dataset's client-side count); with
  `use_server_token_count`, or when the record has none, the server's usage.prompt_tokens.
- usage_* = the server's usage fields, when sent.
- credit_to_start_latency = start_ns - credit issue (AIPerf's name), and our extras:
  credit_to_send_delay = start_ns - credit_received_ns (the worker's own overhead),
  schedule_lag = start_ns - scheduled time (only when the credit had a schedule),
  co_aware_request_latency = final response - (scheduled time, else credit issue): latency as
  the schedule intended it (coordinated-omission aware). effective_latency (AIPerf's name) =
  final response - credit issue.
Timing-manager timestamps (`credit_issued_ns`, `scheduled_ns`) are mapped to the worker's
clock with `record.clock_offset_ns` (local = remote + offset).
- requested_osl (internal) = the output limit the request sent (`max_tokens`);
  osl_mismatch_diff_pct = (OSL - requested) / requested x 100 (signed), when one was sent.
- http_req_* (k6 names), from the worker's wire trace (`record.http`): blocked = pool wait;
  dns_lookup = name resolution of a new connection (0 when cached, reused or an IP);
  connecting = TCP (+TLS) handshake of a new connection, after DNS (0 when reused);
  sending = first to last write of the request; waiting (TTFB) = last write to first read;
  receiving = first to last read; duration = first write to last read;
  connection_overhead = blocked + dns_lookup + connecting; total = the six phases summed;
  data_sent / data_received = bytes written / read (status line, headers, body, framing);
  chunks_sent / chunks_received = writes / reads; connection_reused = 1 or 0.

A failed or cancelled request carries only what AIPerf records for errors: `error` and
`error_isl` (when the ISL is known). `response_error` marks an error found in the response of an
exchange that itself succeeded (the accounting counts it failed too).
"""

from __future__ import annotations

from collections.abc import Callable

from aiperf.endpoints import ParsedResponse
from aiperf.messages import HttpTrace, MetricRecord, RequestRecord

MetricValues = dict[str, float | list[float]]


def compute_metrics(
    record: RequestRecord,
    parsed: ParsedResponse,
    *,
    count_tokens: Callable[[str], int],
    processor_id: str = "",
    use_server_token_count: bool = False,
) -> MetricRecord:
    """Compute the `MetricRecord` of one request (pure; `count_tokens` is the only callout)."""
    error = parsed.error or record.error
    usage = parsed.usage
    isl: int | None = record.input_tokens
    if (use_server_token_count or isl is None) and usage is not None and usage.prompt_tokens is not None:
        isl = usage.prompt_tokens
    metrics: MetricValues = {}
    final_ns = _final_ns(record, parsed)
    if error is not None or record.cancelled:
        if isl is not None:
            metrics["error_isl"] = isl
    else:
        _latencies(record, parsed, final_ns, metrics)
        _tokens(parsed, isl, count_tokens, use_server_token_count, metrics)
        _rates(metrics)
        _accounting(record, final_ns, metrics)
        _osl_mismatch(record.requested_output_tokens, metrics)
        if record.http is not None:
            _http(record.http, metrics)
    return MetricRecord(
        phase=record.phase,
        credit_num=record.credit_num,
        worker_id=record.worker_id,
        conversation_id=record.conversation_id,
        turn_index=record.turn_index,
        start_wall_ns=record.start_wall_ns,
        end_wall_ns=_wall(record, record.end_ns or final_ns),
        metrics=metrics,
        metadata=_metadata(record, processor_id),
        error=error,
        cancelled=record.cancelled,
        processor_id=processor_id,
        response_error=parsed.error is not None and record.error is None and not record.cancelled
        and record.status < 400,
    )


def _final_ns(record: RequestRecord, parsed: ParsedResponse) -> int:
    if parsed.responses:
        return parsed.responses[-1].ts_ns
    return parsed.last_response_ns or record.end_ns


def _latencies(record: RequestRecord, parsed: ParsedResponse, final_ns: int, out: MetricValues) -> None:
    start = record.start_ns
    out["request_latency"] = final_ns - start
    if not parsed.streamed or not parsed.responses:
        return
    ts = [r.ts_ns for r in parsed.responses]
    out["time_to_first_token"] = ts[0] - start
    out["decode_duration"] = final_ns - ts[0]
    if len(ts) > 1:
        out["time_to_second_token"] = ts[1] - ts[0]
        out["inter_chunk_latency"] = [float(b - a) for a, b in zip(ts, ts[1:], strict=False)]
    first_output = next((r.ts_ns for r in parsed.responses if r.text), None)
    if first_output is not None:
        out["time_to_first_output_token"] = first_output - start


def _tokens(parsed: ParsedResponse, isl: int | None, count_tokens: Callable[[str], int],
            server: bool, out: MetricValues) -> None:
    usage = parsed.usage
    if isl is not None:
        out["input_sequence_length"] = isl
    if server and usage is not None and usage.completion_tokens is not None:
        reasoning = usage.reasoning_tokens or 0
        out_tokens = usage.completion_tokens - reasoning
    else:
        text, thought = parsed.text, parsed.reasoning_text
        out_tokens = count_tokens(text) if text else 0
        reasoning = count_tokens(thought) if thought else 0
    out["output_token_count"] = out_tokens
    if reasoning:
        out["reasoning_token_count"] = reasoning
    out["output_sequence_length"] = out_tokens + reasoning
    if usage is not None:
        for tag, value in (("usage_prompt_tokens", usage.prompt_tokens),
                           ("usage_completion_tokens", usage.completion_tokens),
                           ("usage_total_tokens", usage.total_tokens),
                           ("usage_reasoning_tokens", usage.reasoning_tokens)):
            if value is not None:
                out[tag] = value


def _scalar(out: MetricValues, tag: str) -> float | None:
    v = out.get(tag)
    return v if isinstance(v, int | float) else None


def _rates(out: MetricValues) -> None:
    osl = _scalar(out, "output_sequence_length")
    latency = _scalar(out, "request_latency")
    ttft = _scalar(out, "time_to_first_token")
    isl = _scalar(out, "input_sequence_length")
    if osl is not None and latency:
        out["e2e_output_token_throughput"] = osl * 1e9 / latency
    if isl is not None and ttft:
        out["prefill_throughput_per_user"] = isl * 1e9 / ttft
    if osl is not None and osl >= 2 and ttft is not None and latency is not None:
        itl = (latency - ttft) / (osl - 1)
        out["inter_token_latency"] = itl
        if itl > 0:
            out["output_token_throughput_per_user"] = 1e9 / itl


def _accounting(record: RequestRecord, final_ns: int, out: MetricValues) -> None:
    offset = record.clock_offset_ns
    issued = record.credit_issued_ns + offset if record.credit_issued_ns else None
    scheduled = record.scheduled_ns + offset if record.scheduled_ns else None
    if issued is not None:
        out["credit_to_start_latency"] = record.start_ns - issued
        out["effective_latency"] = final_ns - issued
    if record.credit_received_ns:
        out["credit_to_send_delay"] = record.start_ns - record.credit_received_ns
    if scheduled is not None:
        out["schedule_lag"] = record.start_ns - scheduled
    reference = scheduled if scheduled is not None else issued
    if reference is not None:
        out["co_aware_request_latency"] = final_ns - reference


def _osl_mismatch(requested: int | None, out: MetricValues) -> None:
    osl = _scalar(out, "output_sequence_length")
    if requested is None or osl is None:
        return
    out["requested_osl"] = requested
    if requested > 0:
        out["osl_mismatch_diff_pct"] = (osl - requested) * 100.0 / requested


def _http(t: HttpTrace, out: MetricValues) -> None:
    """The k6-style phases of one exchange (see the module doc); nothing when it sent nothing."""
    if not t.send_start_ns:
        return
    blocked = t.pool_wait_end_ns - t.pool_wait_start_ns if t.pool_wait_start_ns and t.pool_wait_end_ns else 0
    dns = connecting = 0
    if not t.reused:
        if t.dns_start_ns and t.dns_end_ns:
            dns = t.dns_end_ns - t.dns_start_ns
        began = max(t.connect_start_ns, t.dns_end_ns)
        if began and t.connected_ns >= began:
            connecting = t.connected_ns - began
    sending = t.send_end_ns - t.send_start_ns
    out["http_req_blocked"] = blocked
    out["http_req_dns_lookup"] = dns
    out["http_req_connecting"] = connecting
    out["http_req_sending"] = sending
    overhead = blocked + dns + connecting
    total = overhead + sending
    if t.recv_first_ns:
        waiting = t.recv_first_ns - t.send_end_ns
        receiving = t.recv_last_ns - t.recv_first_ns
        out["http_req_waiting"] = waiting
        out["http_req_receiving"] = receiving
        out["http_req_duration"] = t.recv_last_ns - t.send_start_ns
        total += waiting + receiving
    out["http_req_connection_overhead"] = overhead
    out["http_req_total"] = total
    out["http_req_data_sent"] = t.sent_bytes
    out["http_req_data_received"] = t.recv_bytes
    out["http_req_chunks_sent"] = t.writes
    out["http_req_chunks_received"] = t.reads
    out["http_req_connection_reused"] = 1 if t.reused else 0


def _wall(record: RequestRecord, perf_ns: int) -> int:
    """Map a perf_counter_ns of the worker to wall-clock ns via the request start."""
    return record.start_wall_ns + (perf_ns - record.start_ns) if perf_ns else 0


def _metadata(record: RequestRecord, processor_id: str) -> dict[str, str | int | float | bool | None]:
    issued = record.credit_issued_ns + record.clock_offset_ns if record.credit_issued_ns else 0
    return {
        "session_num": record.credit_num,
        "x_request_id": record.x_request_id or None,
        "conversation_id": record.conversation_id,
        "turn_index": record.turn_index,
        "credit_issued_ns": _wall(record, issued) or None,
        "request_start_ns": record.start_wall_ns,
        "request_ack_ns": _wall(record, record.response_headers_ns) or None,
        "request_end_ns": _wall(record, record.end_ns) or None,
        "worker_id": record.worker_id,
        "record_processor_id": processor_id,
        "benchmark_phase": str(record.phase),
        "was_cancelled": record.cancelled,
    }
