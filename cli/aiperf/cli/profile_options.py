"""The benchmark flags shared by `aiperf profile` and `aiperf kube generate/profile`, and how
they become the benchmark model (`aiperf.config.Benchmark`).

`ProfileFlags` declares them once (cyclopts flattens it into the command's own flags, with each
field's docstring as its `--help` text). Every flag defaults to None ("not given"): the model
holds the defaults, and a flag given on the command line overrides a `--config` file. `FLAG_PATHS`
says which model field each flag sets; a test keeps it, the flags, the defaults stated in the
help and the model in step. `aiperf.cli.benchmark_flags.build_benchmark` turns them into the
model.

This module imports only the standard library and cyclopts at import time, so `aiperf --help`
stays fast.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Annotated, Literal

from cyclopts import Parameter


@Parameter(name="*")
@dataclass(frozen=True, kw_only=True)
class ProfileFlags:
    """The benchmark itself: endpoint, load, stop condition, dataset and request shape."""

    model: Annotated[list[str] | None, Parameter(name=["--model", "-m", "--model-names"])] = None
    """Model name sent in the requests (required unless --config names one); several as a comma
    list (`--model a,b`) or repeated: each request's model is chosen by --model-selection-strategy."""
    model_selection_strategy: Literal["round_robin", "random", "weighted"] | None = None
    """How each request's model is chosen among several --model names: round_robin (the n-th
    prompt gets model n mod count), random (uniform, seeded by --random-seed), weighted (weights
    come from a config file's models.items) (default: round_robin)."""
    url: Annotated[list[str] | None, Parameter(name=["--url", "-u"], consume_multiple=True)] = None
    """Server base URL; `http://` is added when missing (default: http://localhost:8000). Several
    (`--url A B`, `--url A,B` or repeated): each conversation goes to the next one in turn."""
    url_strategy: Literal["round-robin", "round_robin"] | None = None
    """How several --url values share the load: round-robin, each conversation to the next URL
    (default: round_robin)."""
    custom_endpoint: Annotated[str | None, Parameter(name=["--custom-endpoint", "--endpoint"])] = None
    """Request path instead of the --endpoint-type's (e.g. /v1/custom); joined to each --url as
    the type's path is."""
    endpoint_type: Literal["chat", "completions", "embeddings"] | None = None
    """OpenAI API: chat (/v1/chat/completions), completions, embeddings (default: chat)."""
    transport: Annotated[Literal["http"] | None, Parameter(name=["--transport", "--transport-type"])] = None
    """Transport of the requests: http, the only one (AIPerf's default from the URL scheme)."""
    streaming: bool | None = None
    """Stream responses (SSE); needed for TTFT and inter-token latency (default: false)."""
    concurrency: int | None = None
    """Requests in flight (closed loop), or the cap with --request-rate (default: 1)."""
    request_rate: float | None = None
    """Requests per second (open loop)."""
    request_rate_mode: Annotated[Literal["constant", "poisson", "gamma"] | None,
                                 Parameter(name=["--request-rate-mode", "--arrival-pattern"])] = None
    """Arrival process of --request-rate (default: poisson)."""
    arrival_smoothness: Annotated[float | None, Parameter(name=["--arrival-smoothness",
                                                                "--vllm-burstiness"])] = None
    """Gamma shape for --request-rate-mode gamma; 1 is poisson (default: 1.0)."""
    user_centric_rate: float | None = None
    """Requests per second shared by --num-users users, each sending its next turn
    num_users / rate seconds after its previous one (or when that returns, if later)."""
    num_users: int | None = None
    """Users of --user-centric-rate."""
    concurrency_ramp_duration: float | None = None
    """Seconds over which the concurrency rises from 1 to --concurrency, one step at a time."""
    request_rate_ramp_duration: float | None = None
    """Seconds over which the request rate rises to --request-rate (AIPerf's linear ramp)."""
    prefill_concurrency: int | None = None
    """Requests waiting for their first token at most (prefill); at most --concurrency."""
    prefill_concurrency_ramp_duration: float | None = None
    """Seconds over which --prefill-concurrency rises from 1, one step at a time."""
    request_count: Annotated[int | None, Parameter(name=["--request-count", "--num-requests"])] = None
    """Requests in the profiling phase (default: max(10, 2 x concurrency) unless
    --benchmark-duration or --fixed-schedule decides)."""
    benchmark_duration: float | None = None
    """Seconds to send requests (instead of a count)."""
    benchmark_grace_period: float | None = None
    """Seconds to wait for in-flight requests after --benchmark-duration (default: 30.0)."""
    warmup_request_count: Annotated[int | None, Parameter(name=["--warmup-request-count",
                                                                 "--num-warmup-requests"])] = None
    """Requests sent before profiling, excluded from the results (default: 0)."""
    warmup_duration: float | None = None
    """Seconds of warmup before profiling (with or instead of --warmup-request-count)."""
    warmup_concurrency: int | None = None
    """Requests in flight during the warmup (default: --concurrency)."""
    warmup_request_rate: float | None = None
    """Requests per second during the warmup (default: --request-rate; neither: a closed loop)."""
    warmup_arrival_pattern: Literal["constant", "poisson", "gamma"] | None = None
    """Arrival process of the warmup's rate (default: --request-rate-mode)."""
    warmup_prefill_concurrency: int | None = None
    """Prefill cap during the warmup (default: --prefill-concurrency)."""
    warmup_grace_period: float | None = None
    """Seconds to wait for in-flight warmup requests after --warmup-duration."""
    warmup_concurrency_ramp_duration: float | None = None
    """Concurrency ramp of the warmup, seconds (default: --concurrency-ramp-duration)."""
    warmup_prefill_concurrency_ramp_duration: float | None = None
    """Prefill ramp of the warmup, seconds (default: --prefill-concurrency-ramp-duration)."""
    warmup_request_rate_ramp_duration: float | None = None
    """Rate ramp of the warmup, seconds (default: --request-rate-ramp-duration); needs a warmup rate."""
    request_timeout_seconds: float | None = None
    """Per-request timeout (default: 21600.0)."""
    wait_for_model_timeout: float | None = None
    """Seconds to wait for every URL to be ready before the benchmark starts (0: no wait) (default: 0.0)."""
    wait_for_model_mode: Literal["models", "inference", "both"] | None = None
    """How readiness is probed: 'inference' posts a one-token request, 'models' polls /v1/models for
    the model, 'both' does both (default: inference)."""
    wait_for_model_interval: float | None = None
    """Seconds between readiness probes (default: 5.0)."""
    request_cancellation_rate: float | None = None
    """Percent of requests to cancel on purpose, 0-100 (default: 0.0)."""
    request_cancellation_delay: float | None = None
    """Seconds after sending at which those requests are cancelled (default: 0.0)."""
    fixed_schedule: bool | None = None
    """Send each request at its trace timestamp (--input-file with timestamps) (default: false)."""
    fixed_schedule_auto_offset: bool | None = None
    """Replay timestamps relative to the earliest one (true, AIPerf's default) or as written (false)."""
    fixed_schedule_start_offset: int | None = None
    """Trace time (ms) to start the replay at: earlier requests are skipped, the replay's zero is
    this time (not with --fixed-schedule-auto-offset)."""
    fixed_schedule_end_offset: int | None = None
    """Trace time (ms) to end the replay at: later requests are skipped (unset: the trace's last)."""
    isl: Annotated[int | None, Parameter(name=["--isl", "--synthetic-input-tokens-mean",
                                               "--prompt-input-tokens-mean"])] = None
    """Mean input tokens of synthetic prompts (default: 550)."""
    isl_stddev: Annotated[float | None, Parameter(name=["--isl-stddev", "--synthetic-input-tokens-stddev",
                                                        "--prompt-input-tokens-stddev"])] = None
    """Standard deviation of the input tokens (default: 0.0)."""
    osl: Annotated[int | None, Parameter(name=["--osl", "--output-tokens-mean",
                                               "--prompt-output-tokens-mean"])] = None
    """Mean output tokens requested (max_tokens); unset lets the server decide."""
    osl_stddev: Annotated[float | None, Parameter(name=["--osl-stddev", "--output-tokens-stddev",
                                                        "--prompt-output-tokens-stddev"])] = None
    """Standard deviation of the output tokens (default: 0.0)."""
    isl_block_size: Annotated[int | None, Parameter(name=["--isl-block-size", "--prompt-input-tokens-block-size",
                                                          "--synthetic-input-tokens-block-size"])] = None
    """Tokens per hash id of a mooncake trace (default: 512)."""
    prompt_batch_size: Annotated[int | None, Parameter(name=["--prompt-batch-size", "--batch-size-text",
                                                             "--batch-size", "-b"])] = None
    """Synthetic prompts per request, each its own ISL draw: the input list of embeddings and
    completions, text parts of a chat message (default: 1)."""
    image_batch_size: Annotated[int | None, Parameter(name=["--image-batch-size", "--batch-size-image"])] = None
    """Synthetic random-noise images per request, sent as chat image parts (default: 0)."""
    image_width_mean: float | None = None
    """Mean image width, pixels (default: 512)."""
    image_width_stddev: float | None = None
    """Standard deviation of the image width (default: 0.0)."""
    image_height_mean: float | None = None
    """Mean image height, pixels (default: 512)."""
    image_height_stddev: float | None = None
    """Standard deviation of the image height (default: 0.0)."""
    image_format: Literal["png", "jpeg", "random"] | None = None
    """Image encoding; random draws png or jpeg per image (default: jpeg)."""
    audio_batch_size: Annotated[int | None, Parameter(name=["--audio-batch-size", "--batch-size-audio"])] = None
    """Synthetic Gaussian-noise WAV clips per request, sent as chat input_audio parts (default: 0)."""
    audio_length_mean: float | None = None
    """Mean clip length, seconds (default: 10.0)."""
    audio_length_stddev: float | None = None
    """Standard deviation of the clip length (default: 0.0)."""
    audio_format: Literal["wav"] | None = None
    """Clip encoding (default: wav)."""
    audio_sample_rates: list[float] | None = None
    """Sample rates in kHz, one drawn per clip (default: [16.0])."""
    audio_depths: list[int] | None = None
    """Bit depths (8, 16, 24, 32), one drawn per clip (default: [16])."""
    audio_num_channels: int | None = None
    """Channels of each clip, 1 or 2 (default: 1)."""
    num_dataset_entries: Annotated[int | None, Parameter(name=["--num-dataset-entries", "--num-prompts"])] = None
    """Distinct synthetic prompts, or conversations drawn from a random_pool (default: 100)."""
    conversation_turn_mean: Annotated[float | None, Parameter(name=["--conversation-turn-mean",
                                                                    "--session-turns-mean"])] = None
    """Mean turns per synthetic conversation (default: 1)."""
    conversation_turn_stddev: Annotated[float | None, Parameter(name=["--conversation-turn-stddev",
                                                                      "--session-turns-stddev"])] = None
    """Standard deviation of the turns per conversation (default: 0.0)."""
    conversation_turn_delay_mean: Annotated[float | None, Parameter(name=["--conversation-turn-delay-mean",
                                                                          "--session-turn-delay-mean"])] = None
    """Mean think time before a later turn, ms (default: 0.0)."""
    conversation_turn_delay_stddev: Annotated[float | None, Parameter(
        name=["--conversation-turn-delay-stddev", "--session-turn-delay-stddev"])] = None
    """Standard deviation of that think time, ms (default: 0.0)."""
    conversation_turn_delay_ratio: Annotated[float | None, Parameter(name=["--conversation-turn-delay-ratio",
                                                                           "--session-delay-ratio"])] = None
    """Multiplier of every think time; 0 removes them (default: 1.0)."""
    num_prefix_prompts: Annotated[int | None, Parameter(name=["--num-prefix-prompts", "--prefix-prompt-pool-size",
                                                              "--prompt-prefix-pool-size"])] = None
    """Shared prefixes, one prepended to each first turn (default: 0)."""
    prefix_prompt_length: Annotated[int | None, Parameter(name=["--prefix-prompt-length",
                                                                "--prompt-prefix-length"])] = None
    """Tokens of each shared prefix (default: 0)."""
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
    connection_reuse_strategy: Literal["pooled", "never", "sticky-user-sessions"] | None = None
    """How workers use connections: pooled (shared by all requests), never (one per request),
    sticky-user-sessions (one per conversation, closed after its final turn) (default: pooled)."""
    use_legacy_max_tokens: bool | None = None
    """Send max_tokens instead of max_completion_tokens (chat) (default: false)."""
    use_server_token_count: bool | None = None
    """Use the server's usage counts instead of the client tokenizer (default: false)."""
    server_metrics: Annotated[list[str] | None, Parameter(name="--server-metrics", consume_multiple=True,
                                                          negative=())] = None
    """More Prometheus endpoints to scrape besides --url's /metrics, which is always scraped
    (a URL without a path gets /metrics)."""
    no_server_metrics: Annotated[bool | None, Parameter(name="--no-server-metrics", negative=())] = None
    """Scrape no server metrics (no server_metrics_export.json/.csv)."""
    export_http_trace: bool | None = None
    """Write each request's HTTP trace (wire timestamps, chunks, k6-style durations; AIPerf's
    trace_data) into its profile_export.jsonl line (default: false)."""
    show_trace_timing: bool | None = None
    """Add the HTTP trace timing table (http_req_* metrics) to the console output (default: false)."""
    server_metrics_formats: Annotated[list[str] | None, Parameter(consume_multiple=True)] = None
    """Server-metrics export files to write: json, csv (default: json csv)."""
    gpu_telemetry: Annotated[list[str] | None, Parameter(name="--gpu-telemetry", consume_multiple=True,
                                                         negative=())] = None
    """More DCGM exporter endpoints to scrape for GPU telemetry besides localhost:9400 and :9401
    (a URL without a path gets /metrics)."""
    no_gpu_telemetry: Annotated[bool | None, Parameter(name="--no-gpu-telemetry", negative=())] = None
    """Collect no GPU telemetry (no gpu_telemetry_export.jsonl)."""
    slice_duration: float | None = None
    """Also write the profiling metrics per window of this many seconds
    (profile_export_aiperf_timeslices.json/.csv)."""
    profile_export_prefix: Annotated[str | None, Parameter(name=["--profile-export-prefix",
                                                                 "--profile-export-file"])] = None
    """Also name every export <prefix>.json, <prefix>.csv, <prefix>.jsonl, <prefix>_raw.jsonl,
    <prefix>_timeslices.*, <prefix>_console.txt, <prefix>_gpu_telemetry.jsonl and
    <prefix>_server_metrics.* (links; the standard names stay). A known suffix (run1.json,
    run1_raw.jsonl) is taken off, as in AIPerf."""


@Parameter(name="*")
@dataclass(frozen=True, kw_only=True)
class LocalFlags:
    """How a run on this machine is laid out (`aiperf profile` only)."""

    artifact_dir: Annotated[str | None, Parameter(name=["--artifact-dir", "--output-artifact-dir"])] = None
    """Where results are written (default: artifacts)."""
    keep_dataset_files: bool | None = None
    """Also keep the dataset's working files (dataset/*.dat) in the artifact dir (default: false)."""
    export_level: Annotated[Literal["summary", "records", "raw"] | None,
                            Parameter(name=["--export-level", "--profile-export-level"])] = None
    """summary: aggregate exports only; records: + profile_export.jsonl (default); raw: + profile_export_raw.jsonl."""
    ui: Annotated[Literal["none", "simple", "dashboard"] | None, Parameter(name=["--ui", "--ui-type"])] = None
    """Progress display: dashboard (live phases, metrics, workers, errors, logs), simple (a
    progress bar) or none (default: dashboard when stdout is a terminal, else none)."""
    workers_max: Annotated[int | None, Parameter(name=["--workers-max", "--max-workers"])] = None
    """Worker processes (default: max(1, min(0.75 x CPUs - 1, 32)), at most the concurrency)."""
    record_processors: Annotated[int | None, Parameter(
        name=["--record-processors", "--record-processor-service-count"])] = None
    """Record-processor processes (default: workers / 4, at least 1)."""
    issuing: Annotated[Literal["central", "per_pod"] | None, Parameter(name=["--issuing"])] = None
    """Who issues the credits: central (the timing-manager sends every request's credit) or
    per_pod (each worker pod's worker-group-manager issues its own workers' credits from its
    slice of the plan; the timing-manager only hands out the slices and adds up counters: for
    runs with many worker pods). Same requests, results and exports either way (default: central)."""
    aggregation: Literal["records", "sharded"] | None = None
    """How results reach the records-manager: records (in batches as they are made) or sharded
    (each record-processor aggregates its own and sends them once, at the end: the same exact
    statistics and exports, far less work for the records-manager; the progress counts and the
    dashboard's live metrics then wait for each phase's or the run's end and jump; no
    --slice-duration) (default: records)."""


FLAG_PATHS: dict[str, str] = {
    "model": "models",
    "model_selection_strategy": "model_selection.strategy",
    "url": "endpoint.urls",
    "url_strategy": "endpoint.url_strategy",
    "custom_endpoint": "endpoint.path",
    "transport": "",  # http is the only transport: nothing to set
    "endpoint_type": "endpoint.type",
    "streaming": "endpoint.streaming",
    "request_timeout_seconds": "endpoint.timeout",
    "wait_for_model_timeout": "endpoint.wait_for_model_timeout",
    "wait_for_model_mode": "endpoint.wait_for_model_mode",
    "wait_for_model_interval": "endpoint.wait_for_model_interval",
    "extra_inputs": "endpoint.extra",
    "header": "endpoint.header_names",
    "connection_reuse_strategy": "endpoint.connection_reuse",
    "use_legacy_max_tokens": "endpoint.use_legacy_max_tokens",
    "use_server_token_count": "endpoint.use_server_token_count",
    "server_metrics": "server_metrics.urls",
    "no_server_metrics": "server_metrics.enabled",
    "export_http_trace": "artifacts.trace",
    "show_trace_timing": "artifacts.show_trace_timing",
    "server_metrics_formats": "server_metrics.formats",
    "gpu_telemetry": "gpu_telemetry.urls",
    "no_gpu_telemetry": "gpu_telemetry.enabled",
    "concurrency": "phases.profiling.concurrency",
    "request_rate": "phases.profiling.rate",
    "request_rate_mode": "phases.profiling.type",
    "fixed_schedule": "phases.profiling.type",
    "fixed_schedule_auto_offset": "phases.profiling.auto_offset",
    "fixed_schedule_start_offset": "phases.profiling.start_offset",
    "fixed_schedule_end_offset": "phases.profiling.end_offset",
    "arrival_smoothness": "phases.profiling.smoothness",
    "user_centric_rate": "phases.profiling.rate",
    "num_users": "phases.profiling.users",
    "concurrency_ramp_duration": "phases.profiling.concurrency_ramp.duration",
    "request_rate_ramp_duration": "phases.profiling.rate_ramp.duration",
    "prefill_concurrency": "phases.profiling.prefill_concurrency",
    "prefill_concurrency_ramp_duration": "phases.profiling.prefill_ramp.duration",
    "request_count": "phases.profiling.requests",
    "benchmark_duration": "phases.profiling.duration",
    "benchmark_grace_period": "phases.profiling.grace_period",
    "request_cancellation_rate": "phases.profiling.cancellation.rate",
    "request_cancellation_delay": "phases.profiling.cancellation.delay",
    "warmup_request_count": "phases.warmup.requests",
    "warmup_duration": "phases.warmup.duration",
    "warmup_concurrency": "phases.warmup.concurrency",
    "warmup_request_rate": "phases.warmup.rate",
    "warmup_arrival_pattern": "phases.warmup.type",
    "warmup_prefill_concurrency": "phases.warmup.prefill_concurrency",
    "warmup_grace_period": "phases.warmup.grace_period",
    "warmup_concurrency_ramp_duration": "phases.warmup.concurrency_ramp.duration",
    "warmup_prefill_concurrency_ramp_duration": "phases.warmup.prefill_ramp.duration",
    "warmup_request_rate_ramp_duration": "phases.warmup.rate_ramp.duration",
    "isl": "dataset.prompts.isl.mean",
    "isl_stddev": "dataset.prompts.isl.stddev",
    "osl": "dataset.prompts.osl.mean",
    "osl_stddev": "dataset.prompts.osl.stddev",
    "isl_block_size": "dataset.prompts.block_size",
    "prompt_batch_size": "dataset.prompts.batch_size",
    "num_dataset_entries": "dataset.entries",
    "image_batch_size": "dataset.images.batch_size",
    "image_width_mean": "dataset.images.width.mean",
    "image_width_stddev": "dataset.images.width.stddev",
    "image_height_mean": "dataset.images.height.mean",
    "image_height_stddev": "dataset.images.height.stddev",
    "image_format": "dataset.images.format",
    "audio_batch_size": "dataset.audio.batch_size",
    "audio_length_mean": "dataset.audio.length.mean",
    "audio_length_stddev": "dataset.audio.length.stddev",
    "audio_format": "dataset.audio.format",
    "audio_sample_rates": "dataset.audio.sample_rates",
    "audio_depths": "dataset.audio.depths",
    "audio_num_channels": "dataset.audio.channels",
    "conversation_turn_mean": "dataset.turns.mean",
    "conversation_turn_stddev": "dataset.turns.stddev",
    "conversation_turn_delay_mean": "dataset.turn_delay.mean",
    "conversation_turn_delay_stddev": "dataset.turn_delay.stddev",
    "conversation_turn_delay_ratio": "dataset.turn_delay_ratio",
    "num_prefix_prompts": "dataset.prefix_prompts.pool_size",
    "prefix_prompt_length": "dataset.prefix_prompts.length",
    "input_file": "dataset.path",
    "custom_dataset_type": "dataset.format",
    "tokenizer": "tokenizer.name",
    "random_seed": "random_seed",
    "goodput": "slos",
    "api_key": "",  # a secret: never in the model
    "artifact_dir": "artifacts.dir",
    "keep_dataset_files": "artifacts.keep_dataset",
    "export_level": "artifacts.export_level",
    "slice_duration": "artifacts.slice_duration",
    "profile_export_prefix": "artifacts.prefix",
    "ui": "runtime.ui",
    "workers_max": "runtime.workers",
    "record_processors": "runtime.record_processors",
    "issuing": "runtime.issuing",
    "aggregation": "runtime.aggregation",
}
"""Which `Benchmark` field each flag sets (`phases.<kind>` is the phase of that kind, `dataset`
the one dataset). Several flags may set one field (`phases.profiling.type`)."""

FLAG_NAMES: dict[str, str] = {
    "model": "--model", "url": "--url", "endpoint_type": "--endpoint-type", "header": "--header",
    "extra_inputs": "--extra-inputs", "goodput": "--goodput", "tokenizer": "--tokenizer",
}
"""Flags whose spelling in messages is not `--` + the field name with dashes."""


def flag_name(field: str) -> str:
    """How messages spell the flag of `field` (`isl_stddev` -> `--isl-stddev`)."""
    return FLAG_NAMES.get(field, "--" + field.replace("_", "-"))


def flag_fields() -> list[str]:
    """Every field of `ProfileFlags` and `LocalFlags` (the flags `FLAG_PATHS` must cover)."""
    return [f.name for cls in (ProfileFlags, LocalFlags) for f in fields(cls)]
