"""The benchmark flags shared by `aiperf profile` and `aiperf kube generate/profile`.

`ProfileFlags` declares them once (cyclopts flattens it into the command's own flags, with each
field's docstring as its `--help` text); `build_profile_options` turns them into the
`ProfileOptions` the services read plus the secret values that never go into it. This module
imports only the standard library and cyclopts, so `aiperf --help` stays fast.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Literal

from cyclopts import Parameter

if TYPE_CHECKING:
    from aiperf.config import ProfileOptions


@Parameter(name="*")
@dataclass(frozen=True, kw_only=True)
class ProfileFlags:
    """The benchmark itself: endpoint, load, stop condition, dataset and request shape."""

    model: Annotated[str, Parameter(name=["--model", "-m", "--model-names"])]
    """Model name sent in every request."""
    url: Annotated[str, Parameter(name=["--url", "-u"])] = "localhost:8000"
    """Server base URL (`http://` is added when missing)."""
    endpoint_type: Literal["chat", "completions", "embeddings"] = "chat"
    """OpenAI API: chat (/v1/chat/completions), completions, embeddings."""
    streaming: bool = False
    """Stream responses (SSE); needed for TTFT and inter-token latency."""
    concurrency: int | None = None
    """Requests in flight (closed loop), or the cap with --request-rate."""
    request_rate: float | None = None
    """Requests per second (open loop)."""
    request_rate_mode: Annotated[Literal["constant", "poisson", "gamma"],
                                 Parameter(name=["--request-rate-mode", "--arrival-pattern"])] = "poisson"
    """Arrival process of --request-rate."""
    arrival_smoothness: float = 1.0
    """Gamma shape for --request-rate-mode gamma (1 = poisson)."""
    request_count: Annotated[int | None, Parameter(name=["--request-count", "--num-requests"])] = None
    """Requests in the profiling phase."""
    benchmark_duration: float | None = None
    """Seconds to send requests (instead of a count)."""
    benchmark_grace_period: float = 30.0
    """Seconds to wait for in-flight requests after --benchmark-duration."""
    warmup_request_count: Annotated[int, Parameter(name=["--warmup-request-count",
                                                          "--num-warmup-requests"])] = 0
    """Requests sent before profiling, excluded from the results."""
    request_timeout_seconds: float = 21600.0
    """Per-request timeout."""
    request_cancellation_rate: float = 0.0
    """Percent of requests to cancel on purpose (0-100)."""
    request_cancellation_delay: float = 0.0
    """Seconds after sending at which those requests are cancelled."""
    fixed_schedule: bool = False
    """Send each request at its trace timestamp (--input-file with timestamps)."""
    isl: Annotated[int, Parameter(name=["--isl", "--synthetic-input-tokens-mean"])] = 550
    """Mean input tokens of synthetic prompts."""
    isl_stddev: Annotated[float, Parameter(name=["--isl-stddev", "--synthetic-input-tokens-stddev"])] = 0.0
    """Standard deviation of the input tokens."""
    osl: Annotated[int | None, Parameter(name=["--osl", "--output-tokens-mean"])] = None
    """Mean output tokens requested (max_tokens); unset lets the server decide."""
    osl_stddev: Annotated[float, Parameter(name=["--osl-stddev", "--output-tokens-stddev"])] = 0.0
    """Standard deviation of the output tokens."""
    num_dataset_entries: Annotated[int, Parameter(name=["--num-dataset-entries", "--num-prompts"])] = 100
    """Distinct synthetic prompts (requests cycle through them)."""
    input_file: str | None = None
    """JSONL dataset (or a folder for random_pool)."""
    custom_dataset_type: Literal["single_turn", "multi_turn", "mooncake_trace", "random_pool"] | None = None
    """Format of --input-file (detected when omitted)."""
    tokenizer: str | None = None
    """Hugging Face tokenizer.json (file or folder); default: the bundled Qwen tokenizer.
    Nothing is downloaded."""
    random_seed: int | None = None
    """Seed for prompts, lengths, arrivals and cancellations (reproducible runs)."""
    goodput: str | None = None
    """SLOs, e.g. "request_latency:250 inter_token_latency:10" (ms; tokens/s for throughput)."""
    extra_inputs: Annotated[list[str] | None, Parameter(name="--extra-inputs", consume_multiple=False)] = None
    """Added to every request body: KEY:VALUE (repeatable) or a JSON object."""
    header: Annotated[list[str] | None, Parameter(name=["--header", "-H"], consume_multiple=False)] = None
    """Extra HTTP header NAME:VALUE (repeatable); never written to disk."""
    api_key: str | None = None
    """Sent as "Authorization: Bearer KEY"; never written to disk."""
    use_legacy_max_tokens: bool = False
    """Send max_tokens instead of max_completion_tokens (chat)."""
    use_server_token_count: bool = False
    """Use the server's usage counts instead of the client tokenizer."""


@dataclass(frozen=True, kw_only=True)
class BuiltProfile:
    """What the flags mean: `options` (safe to write to disk) and the secrets kept out of it."""

    options: ProfileOptions
    headers: dict[str, str]
    api_key: str | None


def build_profile_options(flags: ProfileFlags, *,
                          ui: Literal["none", "simple"] | None = None) -> BuiltProfile:
    """`flags` as `ProfileOptions` (not yet validated: call `options.validate()`), with the header
    values and API key apart. `ui` None picks simple on a terminal, else none.

    Raises `aiperf.cli.profile_args.FlagError` (one line naming the flag) for a malformed
    --goodput, --extra-inputs or --header value. Pure: no I/O besides `isatty`.
    """
    from aiperf.cli.profile_args import normalize_url, parse_extra_inputs, parse_goodput, parse_headers
    from aiperf.config import ProfileOptions

    goodput = parse_goodput(flags.goodput)
    extra_inputs = parse_extra_inputs(flags.extra_inputs or [])
    headers = parse_headers(flags.header or [])
    dataset = {"isl": flags.isl, "isl_stddev": flags.isl_stddev, "osl": flags.osl,
               "osl_stddev": flags.osl_stddev, "num_dataset_entries": flags.num_dataset_entries,
               "input_file": flags.input_file, "custom_dataset_type": flags.custom_dataset_type}
    options = ProfileOptions(
        model=flags.model, url=normalize_url(flags.url), endpoint_type=flags.endpoint_type,
        streaming=flags.streaming, concurrency=flags.concurrency, request_rate=flags.request_rate,
        request_rate_mode=flags.request_rate_mode, arrival_smoothness=flags.arrival_smoothness,
        request_count=flags.request_count, benchmark_duration=flags.benchmark_duration,
        benchmark_grace_period=flags.benchmark_grace_period,
        warmup_request_count=flags.warmup_request_count,
        request_timeout_seconds=flags.request_timeout_seconds,
        request_cancellation_rate=flags.request_cancellation_rate,
        request_cancellation_delay=flags.request_cancellation_delay, fixed_schedule=flags.fixed_schedule,
        dataset={k: v for k, v in dataset.items() if v is not None},
        tokenizer=flags.tokenizer, random_seed=flags.random_seed, goodput=goodput,
        extra_inputs=extra_inputs, header_names=sorted(headers),
        use_legacy_max_tokens=flags.use_legacy_max_tokens,
        use_server_token_count=flags.use_server_token_count,
        ui=ui or ("simple" if sys.stdout.isatty() else "none"),
    )
    return BuiltProfile(options=options, headers=headers, api_key=flags.api_key)
