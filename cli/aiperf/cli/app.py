"""The cyclopts application: `aiperf --help` lists every command."""

from __future__ import annotations

from typing import Annotated, Literal

import cyclopts
from cyclopts import Parameter

from aiperf.cli.passthrough import SERVICE_TYPES


def build_app() -> cyclopts.App:
    """The `aiperf` app with all its commands (imports of heavy modules stay lazy)."""
    app = cyclopts.App(
        name="aiperf",
        help="Benchmark LLM inference servers: exact latency and throughput figures "
             "(TTFT, ITL, request latency, token throughput, goodput).",
        version_flags=[],
        result_action="return_value",
    )

    @app.command
    def bringup(*, workers: int = 2, record_processors: int = 1,
                artifact_dir: Annotated[str, cyclopts.Parameter(name="--artifact-dir")] = "artifacts/bringup",
                timeout: float = 30.0) -> int:
        """Start every service as a local process, wait until all have registered, stop them.

        A smoke test of the runtime: exits 0 when every service came up and exited cleanly.

        Parameters
        ----------
        workers
            Worker processes to start.
        record_processors
            Record-processor processes to start.
        artifact_dir
            Where run_config.json and the service logs go.
        timeout
            Seconds every service has to register.
        """
        from aiperf.cli.bringup import run_bringup

        return run_bringup(workers=workers, record_processors=record_processors,
                           artifact_dir=artifact_dir, timeout=timeout)

    @app.command
    def profile(
        *,
        model: Annotated[str, Parameter(name=["--model", "-m", "--model-names"])],
        url: Annotated[str, Parameter(name=["--url", "-u"])] = "localhost:8000",
        endpoint_type: Literal["chat", "completions", "embeddings"] = "chat",
        streaming: bool = False,
        concurrency: int | None = None,
        request_rate: float | None = None,
        request_rate_mode: Annotated[Literal["constant", "poisson", "gamma"],
                                     Parameter(name=["--request-rate-mode", "--arrival-pattern"])] = "poisson",
        arrival_smoothness: float = 1.0,
        request_count: Annotated[int | None, Parameter(name=["--request-count", "--num-requests"])] = None,
        benchmark_duration: float | None = None,
        benchmark_grace_period: float = 30.0,
        warmup_request_count: Annotated[int, Parameter(name=["--warmup-request-count",
                                                              "--num-warmup-requests"])] = 0,
        request_timeout_seconds: float = 21600.0,
        request_cancellation_rate: float = 0.0,
        request_cancellation_delay: float = 0.0,
        fixed_schedule: bool = False,
        isl: Annotated[int, Parameter(name=["--isl", "--synthetic-input-tokens-mean"])] = 550,
        isl_stddev: Annotated[float, Parameter(name=["--isl-stddev", "--synthetic-input-tokens-stddev"])] = 0.0,
        osl: Annotated[int | None, Parameter(name=["--osl", "--output-tokens-mean"])] = None,
        osl_stddev: Annotated[float, Parameter(name=["--osl-stddev", "--output-tokens-stddev"])] = 0.0,
        num_dataset_entries: Annotated[int, Parameter(name=["--num-dataset-entries", "--num-prompts"])] = 100,
        input_file: str | None = None,
        custom_dataset_type: Literal["single_turn", "multi_turn", "mooncake_trace", "random_pool"] | None = None,
        tokenizer: str | None = None,
        random_seed: int | None = None,
        goodput: str | None = None,
        extra_inputs: Annotated[list[str] | None, Parameter(name="--extra-inputs", consume_multiple=False)] = None,
        header: Annotated[list[str] | None, Parameter(name=["--header", "-H"], consume_multiple=False)] = None,
        api_key: str | None = None,
        use_legacy_max_tokens: bool = False,
        use_server_token_count: bool = False,
        artifact_dir: Annotated[str, Parameter(name=["--artifact-dir", "--output-artifact-dir"])] = "artifacts",
        ui: Annotated[Literal["none", "simple"] | None, Parameter(name=["--ui", "--ui-type"])] = None,
        workers_max: Annotated[int | None, Parameter(name=["--workers-max", "--max-workers"])] = None,
        record_processors: Annotated[int | None, Parameter(
            name=["--record-processors", "--record-processor-service-count"])] = None,
        log_level: str = "warning",
    ) -> int:
        """Benchmark an OpenAI-compatible endpoint on this machine (AIPerf 0.13 flags).

        `--concurrency N` alone is a closed loop; `--request-rate R` alone an open loop
        (arrivals by `--request-rate-mode`); both: open loop with at most N in flight.
        Stop after `--request-count` requests (default max(10, 2 x concurrency)) or after
        `--benchmark-duration` seconds (+ `--benchmark-grace-period`). Results go to
        `--artifact-dir`: profile_export_aiperf.json/.csv, profile_export.jsonl, inputs.json.

        Parameters
        ----------
        model
            Model name sent in every request.
        url
            Server base URL (`http://` is added when missing).
        endpoint_type
            OpenAI API: chat (/v1/chat/completions), completions, embeddings.
        streaming
            Stream responses (SSE); needed for TTFT and inter-token latency.
        concurrency
            Requests in flight (closed loop), or the cap with --request-rate.
        request_rate
            Requests per second (open loop).
        request_rate_mode
            Arrival process of --request-rate.
        arrival_smoothness
            Gamma shape for --request-rate-mode gamma (1 = poisson).
        request_count
            Requests in the profiling phase.
        benchmark_duration
            Seconds to send requests (instead of a count).
        benchmark_grace_period
            Seconds to wait for in-flight requests after --benchmark-duration.
        warmup_request_count
            Requests sent before profiling, excluded from the results.
        request_timeout_seconds
            Per-request timeout.
        request_cancellation_rate
            Percent of requests to cancel on purpose (0-100).
        request_cancellation_delay
            Seconds after sending at which those requests are cancelled.
        fixed_schedule
            Send each request at its trace timestamp (--input-file with timestamps).
        isl
            Mean input tokens of synthetic prompts.
        isl_stddev
            Standard deviation of the input tokens.
        osl
            Mean output tokens requested (max_tokens); unset lets the server decide.
        osl_stddev
            Standard deviation of the output tokens.
        num_dataset_entries
            Distinct synthetic prompts (requests cycle through them).
        input_file
            JSONL dataset (or a folder for random_pool).
        custom_dataset_type
            Format of --input-file (detected when omitted).
        tokenizer
            Hugging Face tokenizer.json (file or folder); default: the bundled Qwen tokenizer. Nothing is downloaded.
        random_seed
            Seed for prompts, lengths, arrivals and cancellations (reproducible runs).
        goodput
            SLOs, e.g. "request_latency:250 inter_token_latency:10" (ms; tokens/s for throughput).
        extra_inputs
            Added to every request body: KEY:VALUE (repeatable) or a JSON object.
        header
            Extra HTTP header NAME:VALUE (repeatable); never written to disk.
        api_key
            Sent as "Authorization: Bearer KEY"; never written to disk.
        use_legacy_max_tokens
            Send max_tokens instead of max_completion_tokens (chat).
        use_server_token_count
            Use the server's usage counts instead of the client tokenizer.
        artifact_dir
            Where results are written.
        ui
            Progress display: simple (a progress bar) or none (default: simple on a terminal).
        workers_max
            Worker processes (default: max(1, min(0.75 x CPUs - 1, 32)), at most the concurrency).
        record_processors
            Record-processor processes (default: workers / 4, at least 1).
        log_level
            Log level of the services (debug, info, warning, error); logs go to ARTIFACT_DIR/logs.
        """
        import sys

        from aiperf.cli.main import T0_WALL_NS
        from aiperf.cli.profile import run_profile
        from aiperf.cli.profile_args import (
            FlagError,
            normalize_url,
            parse_extra_inputs,
            parse_goodput,
            parse_headers,
        )
        from aiperf.config import ProfileOptions

        try:
            options = ProfileOptions(
                model=model, url=normalize_url(url), endpoint_type=endpoint_type, streaming=streaming,
                concurrency=concurrency, request_rate=request_rate, request_rate_mode=request_rate_mode,
                arrival_smoothness=arrival_smoothness, request_count=request_count,
                benchmark_duration=benchmark_duration, benchmark_grace_period=benchmark_grace_period,
                warmup_request_count=warmup_request_count, request_timeout_seconds=request_timeout_seconds,
                request_cancellation_rate=request_cancellation_rate,
                request_cancellation_delay=request_cancellation_delay, fixed_schedule=fixed_schedule,
                dataset={k: v for k, v in {
                    "isl": isl, "isl_stddev": isl_stddev, "osl": osl, "osl_stddev": osl_stddev,
                    "num_dataset_entries": num_dataset_entries, "input_file": input_file,
                    "custom_dataset_type": custom_dataset_type}.items() if v is not None},
                tokenizer=tokenizer, random_seed=random_seed, goodput=parse_goodput(goodput),
                extra_inputs=parse_extra_inputs(extra_inputs or []),
                header_names=sorted(parse_headers(header or [])),
                use_legacy_max_tokens=use_legacy_max_tokens, use_server_token_count=use_server_token_count,
                ui=ui or ("simple" if sys.stdout.isatty() else "none"),
            )
            headers = parse_headers(header or [])
        except FlagError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return run_profile(options, headers=headers, api_key=api_key, artifact_dir=artifact_dir,
                           workers_max=workers_max, record_processors=record_processors,
                           t0_wall_ns=T0_WALL_NS, log_level=log_level)

    @app.command
    def demo(*, concurrency: int = 4, request_count: int = 200,
             artifact_dir: Annotated[str, Parameter(name="--artifact-dir")] = "artifacts/demo") -> int:
        """Benchmark the bundled mock LLM server (TTFT 40 ms, ITL 8 ms, 64 tokens) end to end.

        Parameters
        ----------
        concurrency
            Requests in flight.
        request_count
            Requests to send.
        artifact_dir
            Where results are written.
        """
        from aiperf.cli.demo import run_demo
        from aiperf.cli.main import T0_WALL_NS

        return run_demo(concurrency=concurrency, request_count=request_count,
                        artifact_dir=artifact_dir, t0_wall_ns=T0_WALL_NS)

    @app.command(name="service")
    def service_help() -> int:
        """Run one service process by hand: `aiperf service TYPE --config run_config.json`."""
        return 0

    service_help.__doc__ = (f"Run one service process: `aiperf service TYPE --config run_config.json`. "
                            f"TYPE: {', '.join(SERVICE_TYPES)}.")

    @app.command(name="mock-server")
    def mock_server_help() -> int:
        """Run the bundled OpenAI-compatible mock LLM server (`aiperf mock-server --help`)."""
        return 0

    @app.command(name="dev-fakes")
    def dev_fakes_help() -> int:
        """Start fakes of one service's peers to debug it alone (`aiperf dev-fakes --help`)."""
        return 0

    return app
