"""The metrics we compute: AIPerf 0.13 tags, headers and units, plus our own extras.

Values travel in base units (ns for times, tokens, tokens/s); exports show display units.
"""

from __future__ import annotations

from dataclasses import dataclass

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """How one metric is named and shown.

    `scale` multiplies a base-unit value into `unit` (the display unit). `larger_is_better`
    sets the goodput direction. `ours` marks metrics AIPerf does not have: exports keep them
    out of AIPerf's top-level keys.
    """

    tag: str
    header: str
    unit: str
    scale: float = 1.0
    larger_is_better: bool = False
    ours: bool = False


def _ms(tag: str, header: str, *, ours: bool = False) -> MetricSpec:
    return MetricSpec(tag, header, "ms", 1.0 / NS_PER_MS, ours=ours)


def _tokens(tag: str, header: str) -> MetricSpec:
    return MetricSpec(tag, header, "tokens")


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
    _tokens("usage_prompt_tokens", "Usage Prompt Tokens"),
    _tokens("usage_completion_tokens", "Usage Completion Tokens"),
    _tokens("usage_total_tokens", "Usage Total Tokens"),
    _tokens("usage_reasoning_tokens", "Usage Reasoning Tokens"),
    _tokens("error_isl", "Error Input Sequence Length"),
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
)

SPECS: dict[str, MetricSpec] = {s.tag: s for s in (*RECORD_METRICS, *DERIVED_METRICS)}

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
