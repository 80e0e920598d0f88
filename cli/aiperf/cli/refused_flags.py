"""The AIPerf 0.13 `profile` flags we refuse, and why: every option spelling AIPerf's
`aiperf profile --help` lists is either accepted by ours with the same meaning
(`aiperf.cli.profile_options`) or named here, by feature, with the reason (tests/compat's flag
check reads AIPerf's help to keep it so). A refused flag is one line and exit 2, before any
parsing: `aiperf: --foo is not supported: <reason>`.

`docs/compat-flags.md` lists the same table (`render_markdown`; a test keeps them equal).
Standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence

NOT_BUILT_YET = "not built yet"

_SEARCH = "adaptive search and search recipes are not built"
_SWEEP_RANGES = "range sweeps (min/max/steps) are not built; give a comma list, e.g. --concurrency 4,8,16"
_SLA = ("an SLA of the search recipes (--search-recipe), which are not built; for goodput give "
        "--goodput with the metric, e.g. time_to_first_token:200")
_TRACE = "trace replay knobs beyond the recorded timestamps are not built"
_BASETEN = "honoured only by AIPerf's baseten_trace loader; baseten traces are not built"
_AGENTIC = "agentic trajectory replay is not built"
_ACCURACY = "accuracy benchmarks (MMLU, AIME, ...) are not built"
_IMAGE = "image files and folders as inputs are not built (synthetic images are: --image-batch-size)"
_VIDEO = "synthetic video inputs and video endpoints are not built"
_RANKINGS = "ranking endpoints are not built"
_SYNTHESIS = "trace re-synthesis is not built"
_PUBLIC = "public datasets are not built (nothing is downloaded); give --input-file"
_MLFLOW = "MLflow upload is not built"
_WANDB = "Weights & Biases upload is not built"
_OTEL = "OpenTelemetry export is not built"
_NETWORK = "network latency probing and network-adjusted metrics are not built"
_ZMQ = "ZMQ addressing is chosen by aiperf"
_RESET = "KV-cache reset requests are not built"
_PROFILER = "server profiler start/stop requests are not built"
_SYSTEM = "system prompts are not built"
_SCENARIO = "named scenario locks are not built"
_SWEEP_SEED = "the seed of each sweep variation is set by a config file's sweep: block (same_seed), not a flag"

REFUSED: dict[str, dict[str, str]] = {
    "Sessions": {
        "--conversation-num": NOT_BUILT_YET, "--num-conversations": NOT_BUILT_YET, "--num-sessions": NOT_BUILT_YET,
        "--num-warmup-sessions": NOT_BUILT_YET,
    },
    "Endpoint": {
        "--reset-kv-cache": _RESET, "--reset-kv-cache-timeout-seconds": _RESET, "--reset-kv-cache-path": _RESET,
        "--server-profiler": _PROFILER, "--server-profiler-timeout-seconds": _PROFILER,
        "--server-profiler-start-path": _PROFILER, "--server-profiler-stop-path": _PROFILER,
        "--per-chunk-usage": "per-chunk usage (continuous_usage_stats) is not built",
        "--download-video-content": _VIDEO,
        "--request-content-type": "only JSON request bodies are built",
        "--session-header": "a session affinity header is not built",
        "--uuid-and-strip": "multimodal UUID stripping is not built",
    },
    "Dataset and prompts": {
        "--public-dataset": _PUBLIC, "--hf-subset": _PUBLIC, "--hf-weka-dataset": _PUBLIC, "--dataset-filter": _PUBLIC,
        "--dataset-sampling-strategy": "not selectable: conversations are taken in order, wrapping around (sequential)",
        "--prompt-corpus": "only the built-in prompt corpus exists",
        "--random-corpus-style": "prompt corpus styles are not built",
        "--random-range-ratio": "uniform ISL/OSL windows are not built",
        "--sequence-distribution": "not built as a flag; give prompts.sequence_distribution in --config",
        "--seq-dist": "not built as a flag; give prompts.sequence_distribution in --config",
        "--cache-bust": "cache-bust markers are not built",
        "--system-prompt": _SYSTEM, "--system-prompt-file": _SYSTEM,
        "--shared-system-prompt-length": "shared system prompts are not built",
        "--user-context-prompt-length": "per-session user context prompts are not built",
    },
    "Trace replay": {
        "--replay-speedup": _BASETEN, "--max-idle-gap-cap-seconds": _BASETEN, "--open-loop-replay": _BASETEN,
        "--no-open-loop-replay": _BASETEN, "--open-loop-strict": _BASETEN, "--omit-kv-hints": _BASETEN,
        "--force-min-tokens": _BASETEN, "--no-force-min-tokens": _BASETEN,
        "--inter-turn-delay-cap-seconds": _TRACE, "--trace-idle-gap-cap-seconds": _TRACE,
        "--trace-session-sample-ratio": _TRACE, "--ignore-trace-delays": _TRACE, "--use-think-time-only": _TRACE,
        "--max-context-length": _TRACE,
        "--synthesis-speedup-ratio": _SYNTHESIS, "--synthesis-prefix-len-multiplier": _SYNTHESIS,
        "--synthesis-prefix-root-multiplier": _SYNTHESIS, "--synthesis-prompt-len-multiplier": _SYNTHESIS,
        "--synthesis-output-len-multiplier": _SYNTHESIS, "--synthesis-max-isl": _SYNTHESIS,
        "--synthesis-max-osl": _SYNTHESIS, "--allow-dataset-wrap": _SYNTHESIS, "--no-allow-dataset-wrap": _SYNTHESIS,
    },
    "Load": {
        "--request-rate-series": "piecewise request-rate series are not built",
        "--failed-request-threshold": "aborting on a failed-request ratio is not built",
        "--trajectory-start-min-ratio": _AGENTIC, "--trajectory-start-max-ratio": _AGENTIC,
        "--burst-phase-starts": _AGENTIC, "--system-idle-gap-cap-seconds": _AGENTIC,
        "--agentic-cache-warmup-duration": _AGENTIC, "--agentic-warmup-grace-period": _AGENTIC,
        "--scenario": _SCENARIO, "--unsafe-override": _SCENARIO,
    },
    "Multimodal inputs": {
        "--image-source": _IMAGE, "--image-source-sampling": _IMAGE,
        "--video-batch-size": _VIDEO, "--batch-size-video": _VIDEO, "--video-duration": _VIDEO,
        "--video-fps": _VIDEO, "--video-width": _VIDEO, "--video-height": _VIDEO, "--video-synth-type": _VIDEO,
        "--video-format": _VIDEO, "--video-codec": _VIDEO, "--video-audio-sample-rate": _VIDEO,
        "--video-audio-num-channels": _VIDEO, "--video-audio-codec": _VIDEO, "--video-audio-depth": _VIDEO,
        "--rankings-passages-mean": _RANKINGS, "--rankings-passages-stddev": _RANKINGS,
        "--rankings-passages-prompt-token-mean": _RANKINGS, "--rankings-passages-prompt-token-stddev": _RANKINGS,
        "--rankings-query-prompt-token-mean": _RANKINGS, "--rankings-query-prompt-token-stddev": _RANKINGS,
    },
    "Tokenizer": {
        "--tokenizer-revision": "tokenizers are read from local files, never downloaded",
        "--tokenizer-trust-remote-code": "tokenizers with custom code are not built",
        "--apply-chat-template": "chat-template token counting is not built",
    },
    "Output and exports": {
        "--plot-required": "a failed plot is a warning, never a failed run",
        "--export-outputs-json": "outputs.json is not built",
        "--otel-url": _OTEL, "--stream": _OTEL, "--otel-resource-attributes": _OTEL, "--gen-ai-provider": _OTEL,
        "--mlflow-tracking-uri": _MLFLOW, "--mlflow-experiment": _MLFLOW, "--mlflow-run-name": _MLFLOW,
        "--mlflow-tag": _MLFLOW, "--mlflow-parent-run-id": _MLFLOW, "--mlflow-artifact-glob": _MLFLOW,
        "--wandb-project": _WANDB, "--wandb-entity": _WANDB, "--wandb-run-name": _WANDB, "--wandb-tag": _WANDB,
    },
    "Network latency": {
        "--network-latency-automatic": _NETWORK, "--network-latency-mean": _NETWORK,
        "--network-latency-ping-interval": _NETWORK,
    },
    "Runtime and logging": {
        "--api-host": "the api host is set with AIPERF_API_HOST",
        "--api-port": "the api port is set with AIPERF_API_PORT",
        "--stats-interval": "the realtime stats interval is fixed",
        "--zmq-host": _ZMQ, "--zmq-ipc-path": _ZMQ, "--zmq-dual-bind": _ZMQ,
        "--extra-verbose": "there is no TRACE log level; -v (--log-level debug) is the most",
        "-vv": "there is no TRACE log level; -v (--log-level debug) is the most",
    },
    "Accuracy": {
        "--accuracy-benchmark": _ACCURACY, "--accuracy-tasks": _ACCURACY, "--accuracy-n-shots": _ACCURACY,
        "--accuracy-enable-cot": _ACCURACY, "--accuracy-no-enable-cot": _ACCURACY, "--accuracy-grader": _ACCURACY,
        "--accuracy-system-prompt": _ACCURACY, "--accuracy-verbose": _ACCURACY,
    },
    "Sweeps and search": {
        "--variant": "named sweep variants on the command line are not built; give a sweep: block in --config",
        "--sweep-variant": "named sweep variants on the command line are not built; give a sweep: block in --config",
        "--parameter-sweep-mode": "the order of trials and variations is not selectable",
        "--parameter-sweep-same-seed": _SWEEP_SEED, "--no-parameter-sweep-same-seed": _SWEEP_SEED,
        "--no-sweep-table": "the per-variation streaming sweep table is not built (nothing to suppress)",
        "--concurrency-min": _SWEEP_RANGES, "--concurrency-max": _SWEEP_RANGES, "--concurrency-steps": _SWEEP_RANGES,
        "--isl-min": _SWEEP_RANGES, "--isl-max": _SWEEP_RANGES, "--isl-steps": _SWEEP_RANGES,
        "--osl-min": _SWEEP_RANGES, "--osl-max": _SWEEP_RANGES, "--osl-steps": _SWEEP_RANGES,
        "--isl-osl-pairs": _SEARCH, "--search-recipe": _SEARCH, "--search-space": _SEARCH, "--search-metric": _SEARCH,
        "--search-stat": _SEARCH, "--search-direction": _SEARCH, "--search-planner": _SEARCH,
        "--search-initial-points": _SEARCH, "--search-max-iterations": _SEARCH, "--search-random-seed": _SEARCH,
        "--search-percentile-pooling": _SEARCH, "--search-sla": _SEARCH, "--search-sla-tier": _SEARCH,
        "--search-style": _SEARCH, "--bo-constraint-mode": _SEARCH, "--optuna-sampler": _SEARCH,
        "--optuna-acquisition": _SEARCH, "--optuna-terminator": _SEARCH, "--convergence-metric": _SEARCH,
        "--convergence-stat": _SEARCH, "--convergence-threshold": _SEARCH, "--convergence-mode": _SEARCH,
        "--degradation-metric-tag": _SEARCH, "--degradation-stat": _SEARCH, "--degradation-threshold": _SEARCH,
        "--slo-attainment-fraction": _SEARCH,
        "--ttft-sla-ms": _SLA, "--itl-sla-ms": _SLA, "--tpot-sla-ms": _SLA, "--e2e-sla-ms": _SLA,
        "--error-rate-sla": _SLA,
    },
}
"""Refused spellings by feature: spelling -> why (each spelling once)."""

REFUSED_FLAGS: dict[str, str] = {flag: why for group in REFUSED.values() for flag, why in group.items()}
"""Every refused spelling -> why."""


def refusal(args: Sequence[str]) -> str | None:
    """The one-line message for the first refused flag in `args` (`--flag` or `--flag=value`;
    nothing after `--`), or None when there is none."""
    for arg in args:
        if arg == "--":
            break
        name = arg.partition("=")[0]
        if name in REFUSED_FLAGS:
            return f"aiperf: {name} is not supported: {REFUSED_FLAGS[name]}"
    return None


def render_markdown() -> str:
    """The table as docs/compat-flags.md shows it: one section per feature, a row per flag."""
    lines: list[str] = []
    for feature, flags in REFUSED.items():
        lines += [f"### {feature}", "", "| flag | why not |", "|---|---|"]
        lines += [f"| `{flag}` | {why} |" for flag, why in flags.items()]
        lines.append("")
    return "\n".join(lines)
