"""The metrics we compute: AIPerf 0.13 tags, headers and units, plus our own extras.

Values travel in base units (ns for times, tokens, tokens/s, bytes); exports show display
units. Four kinds: `RECORD_METRICS` (one value per request, full statistics),
`DERIVED_METRICS` (one number per run, `avg` only), `SWEEP_METRICS` (time-weighted over the
benchmark window: avg, min, max, p50, p90, p95, p99, std) and `INTERNAL_METRICS` (per request,
needed by a derived metric, never exported).
"""

from __future__ import annotations

from dataclasses import dataclass

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000
BYTES_PER_KB = 1024


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """How one metric is named and shown.

    `scale` multiplies a base-unit value into `unit` (the display unit). `larger_is_better`
    sets the goodput direction. `ours` marks metrics AIPerf does not have: exports keep them
    out of AIPerf's top-level keys. `console` names the console table that shows it
    (`"main"`, `"effective"`, `"active"`, `"usage"`) or is None when AIPerf's console leaves it
    out (it is still exported). `internal` metrics travel with a record but are never exported.
    """

    tag: str
    header: str
    unit: str
    scale: float = 1.0
    larger_is_better: bool = False
    ours: bool = False
    console: str | None = "main"
    internal: bool = False


def _ms(tag: str, header: str, *, ours: bool = False) -> MetricSpec:
    return MetricSpec(tag, header, "ms", 1.0 / NS_PER_MS, ours=ours)


def _tokens(tag: str, header: str, *, console: str | None = "main") -> MetricSpec:
    return MetricSpec(tag, header, "tokens", console=console)


def _http_ms(tag: str, header: str) -> MetricSpec:
    return MetricSpec(tag, header, "ms", 1.0 / NS_PER_MS, console=None)


def _http(tag: str, header: str, unit: str, scale: float = 1.0) -> MetricSpec:
    return MetricSpec(tag, header, unit, scale, console=None)


def _per_user(tag: str, header: str) -> MetricSpec:
    return MetricSpec(tag, header, "tokens/sec/user", larger_is_better=True)


RECORD_METRICS: tuple[MetricSpec, ...] = (
    _ms("time_to_first_token", "Time to First Token"),
    _ms("time_to_second_token", "Time to Second Token"),
    _ms("time_to_first_output_token", "Time to First Output Token"),
    _ms("request_latency", "Request Latency"),
    _ms("inter_token_latency", "Inter Token Latency"),
    _ms("inter_chunk_latency", "Inter Chunk Latency"),
    _ms("decode_duration", "Decode Duration"),
    _per_user("output_token_throughput_per_user", "Output Token Throughput Per User"),
    _per_user("e2e_output_token_throughput", "E2E Output Token Throughput"),
    _per_user("prefill_throughput_per_user", "Prefill Throughput Per User"),
    _tokens("output_sequence_length", "Output Sequence Length"),
    _tokens("input_sequence_length", "Input Sequence Length"),
    _tokens("output_token_count", "Output Token Count"),
    _tokens("reasoning_token_count", "Reasoning Token Count"),
    _tokens("usage_prompt_tokens", "Usage Prompt Tokens", console="usage"),
    _tokens("usage_completion_tokens", "Usage Completion Tokens", console="usage"),
    _tokens("usage_total_tokens", "Usage Total Tokens", console="usage"),
    _tokens("usage_reasoning_tokens", "Usage Reasoning Tokens", console="usage"),
    _tokens("error_isl", "Error Input Sequence Length", console=None),
    MetricSpec("osl_mismatch_diff_pct", "OSL Mismatch Diff", "%", console=None),
    # HTTP trace (k6 names): where the bytes of each request moved.
    _http_ms("http_req_blocked", "HTTP Blocked"),
    _http_ms("http_req_dns_lookup", "HTTP DNS Lookup"),
    _http_ms("http_req_connecting", "HTTP Connecting"),
    _http_ms("http_req_sending", "HTTP Sending"),
    _http_ms("http_req_waiting", "HTTP Waiting (TTFB)"),
    _http_ms("http_req_receiving", "HTTP Receiving"),
    _http_ms("http_req_duration", "HTTP Duration (excl. conn)"),
    _http_ms("http_req_connection_overhead", "HTTP Connection Overhead"),
    _http_ms("http_req_total", "HTTP Total Time"),
    _http("http_req_data_sent", "HTTP Data Sent", "KB", 1.0 / BYTES_PER_KB),
    _http("http_req_data_received", "HTTP Data Received", "KB", 1.0 / BYTES_PER_KB),
    _http("http_req_connection_reused", "HTTP Connection Reused", "ratio"),
    _http("http_req_chunks_sent", "HTTP Chunks Sent", "count"),
    _http("http_req_chunks_received", "HTTP Chunks Received", "count"),
    _ms("credit_to_start_latency", "Credit-to-Start Latency"),
    _ms("effective_latency", "Effective Latency (CO-aware)"),
    # Ours: where a request's time went before it reached the wire.
    _ms("credit_to_send_delay", "Credit-to-Send Delay", ours=True),
    _ms("schedule_lag", "Schedule Lag", ours=True),
    _ms("co_aware_request_latency", "CO-aware Request Latency", ours=True),
)

DERIVED_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("request_throughput", "Request Throughput", "requests/sec", larger_is_better=True),
    MetricSpec("request_count", "Request Count", "requests"),
    MetricSpec("error_request_count", "Error Request Count", "requests"),
    MetricSpec("completed_request_count", "Completed Requests (Success + Error)", "requests"),
    MetricSpec("cancelled_request_count", "Cancelled Request Count", "requests"),
    MetricSpec("output_token_throughput", "Output Token Throughput", "tokens/sec", larger_is_better=True),
    MetricSpec("input_token_throughput", "Input Token Throughput", "tokens/sec", larger_is_better=True),
    MetricSpec("total_token_throughput", "Total Token Throughput", "tokens/sec", larger_is_better=True),
    MetricSpec("goodput", "Goodput", "requests/sec", larger_is_better=True),
    MetricSpec("good_request_count", "Good Request Count", "requests"),
    MetricSpec("benchmark_duration", "Benchmark Duration", "sec"),
    MetricSpec("total_output_tokens", "Total Output Tokens", "tokens"),
    MetricSpec("total_reasoning_tokens", "Total Reasoning Tokens", "tokens"),
    MetricSpec("total_isl", "Total Input Sequence Length", "tokens"),
    MetricSpec("total_osl", "Total Output Sequence Length", "tokens"),
    MetricSpec("total_error_isl", "Total Error Input Sequence Length", "tokens"),
    MetricSpec("request_error_rate", "Request Error Rate", "%"),
    MetricSpec("osl_mismatch_count", "OSL Mismatch Count", "requests", console=None),
    MetricSpec("total_usage_prompt_tokens", "Total Usage Prompt Tokens", "tokens", console="usage"),
    MetricSpec("total_usage_completion_tokens", "Total Usage Completion Tokens", "tokens", console="usage"),
    MetricSpec("total_usage_total_tokens", "Total Usage Total Tokens", "tokens", console="usage"),
    MetricSpec("total_usage_reasoning_tokens", "Total Usage Reasoning Tokens", "tokens", console="usage"),
)


def _effective(tag: str, header: str, unit: str) -> MetricSpec:
    return MetricSpec(tag, header, unit, larger_is_better=unit != "requests", console="effective")


def _active(tag: str, header: str, unit: str) -> MetricSpec:
    return MetricSpec(tag, header, unit, larger_is_better=True, console="active")


SWEEP_METRICS: tuple[MetricSpec, ...] = (
    _effective("effective_concurrency", "Effective Concurrency", "requests"),
    _effective("effective_decode_throughput", "Effective Decode Throughput", "tokens/sec"),
    _effective("effective_prefill_throughput", "Effective Prefill Throughput", "tokens/sec"),
    _effective("effective_decode_concurrency", "Effective Decode Concurrency", "requests"),
    _effective("effective_prefill_concurrency", "Effective Prefill Concurrency", "requests"),
    _effective("effective_total_throughput", "Effective Total Throughput", "tokens/sec"),
    _effective("effective_decode_throughput_per_user", "Effective Decode Throughput Per User", "tokens/sec/user"),
    _effective("effective_prefill_throughput_per_user", "Effective Prefill Throughput Per User",
               "tokens/sec/user"),
    MetricSpec("tokens_in_flight", "Tokens In Flight", "tokens", console="effective"),
    _active("active_decode_throughput", "Active Decode Throughput", "tokens/sec"),
    _active("active_prefill_throughput", "Active Prefill Throughput", "tokens/sec"),
    _active("active_decode_throughput_per_user", "Active Decode Throughput Per User", "tokens/sec/user"),
    _active("active_prefill_throughput_per_user", "Active Prefill Throughput Per User", "tokens/sec/user"),
    _active("active_total_throughput", "Active Total Throughput", "tokens/sec"),
)
"""Time-weighted metrics of the whole run (`aiperf.metrics.sweepline`), in AIPerf's order."""

INTERNAL_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("requested_osl", "Requested OSL", "tokens", console=None, internal=True),
)

SPECS: dict[str, MetricSpec] = {s.tag: s for s in (*RECORD_METRICS, *DERIVED_METRICS, *SWEEP_METRICS,
                                                   *INTERNAL_METRICS)}

SUMMARY_ORDER: tuple[str, ...] = (
    "request_throughput", "request_latency", "request_count", "time_to_first_token",
    "time_to_second_token", "inter_token_latency", "output_token_throughput",
    "output_token_throughput_per_user", "output_sequence_length", "input_sequence_length", "goodput",
    "good_request_count", "output_token_count", "inter_chunk_latency", "total_output_tokens",
    "benchmark_duration", "total_isl", "total_osl",
)
"""AIPerf 0.13's order of the first metric keys in profile_export_aiperf.json; others follow."""


def spec_of(tag: str) -> MetricSpec:
    """Return the spec of `tag`; an unknown tag gets a neutral spec (header = tag, no unit)."""
    return SPECS.get(tag) or MetricSpec(tag, tag, "")
