"""What of AIPerf 0.13's config v2 we do not build yet, field by field, and why.

AIPerf's benchmark body has many sections and knobs. A field we read is either part of our model
(`aiperf.config.benchmark`), so it does what AIPerf documents, or it is listed here. A listed field
whose value asks for nothing (`otel: {}`, `network_latency: {enabled: false}`, `seamless: false`,
the defaults AIPerf itself writes out) is dropped; any other value is refused with one line that
names the field and the reason (`gpu_telemetry.mode: not supported (...)`), never silently ignored.
Anything neither modelled nor listed is a typo: the model reports it as an unknown field.

`docs/compat.md` lists the same features (a test keeps the two in step). Paths are those of the
normalized document (`aiperf.config.loader.normalize`): snake_case, `[]` for every item of a list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from aiperf.config.errors import ConfigError

__all__ = ["UNBUILT", "Unbuilt", "check_supported"]


def _nothing(value: Any) -> bool:
    return value is None or value is False or value == 0 or value == "" or value == [] or value == {}


def _is(*values: Any) -> Callable[[Any], bool]:
    return lambda value: value is None or value in values


def _off(value: Any) -> bool:
    """An optional section that stays off: absent, empty, or `enabled: false` alone."""
    return _nothing(value) or (isinstance(value, dict) and value.get("enabled") is False
                               and set(value) <= {"enabled", "ping_interval"})


def _inert_section(defaults: dict[str, Any]) -> Callable[[Any], bool]:
    """A section whose every key holds its (no-op) default."""
    def check(value: Any) -> bool:
        return _nothing(value) or (isinstance(value, dict)
                                   and all(k in defaults and (v == defaults[k] or _nothing(v))
                                           for k, v in value.items()))
    return check


@dataclass(frozen=True)
class Unbuilt:
    """A feature of AIPerf we do not build: `reason` says what it is and why; `inert(value)` is
    True for the values that ask for nothing (those are dropped)."""

    reason: str
    inert: Callable[[Any], bool] = _nothing


_TRACE = "trace replay knobs beyond the recorded timestamps are not built"
_AGENTIC = "agentic trajectory replay is not built"
_ADAPTIVE = "adaptive scaling of a phase is not built"
_RAMP = "only linear ramps are built (AIPerf 0.13.0 itself ramps linearly whatever the strategy)"

UNBUILT: dict[str, Unbuilt] = {
    # -- whole sections --------------------------------------------------------------------------
    "network_latency": Unbuilt("network latency probing and network-adjusted metrics are not built", _off),
    "otel": Unbuilt("OpenTelemetry export is not built", _inert_section(
        {"stream_metrics_enabled": True, "stream_timing_enabled": True, "custom_resource_attributes": {}})),
    "mlflow": Unbuilt("MLflow upload is not built", _inert_section({"experiment": "aiperf"})),
    "wandb": Unbuilt("Weights & Biases upload is not built", _inert_section({})),
    "accuracy": Unbuilt("accuracy benchmarks (MMLU, AIME, ...) are not built", _inert_section({"verbose": False})),
    "metrics": Unbuilt("metric plugin settings are not built", _inert_section({})),
    "scenario": Unbuilt("named scenario locks are not built"),
    "unsafe_override": Unbuilt("named scenario locks are not built"),
    # -- models ----------------------------------------------------------------------------------
    "models.items[].lora": Unbuilt("LoRA adapters per model are not built"),
    "models.items[].modalities": Unbuilt("per-model modalities are not built"),
    "models.items[].tokenizer": Unbuilt("a tokenizer per model is not built (use tokenizer.name)"),
    # -- endpoint --------------------------------------------------------------------------------
    "endpoint.transport": Unbuilt("only the http transport exists", _is("http")),
    "endpoint.per_chunk_usage": Unbuilt("per-chunk usage (continuous_usage_stats) is not built"),
    "endpoint.template": Unbuilt("template endpoints are not built"),
    "endpoint.download_video_content": Unbuilt("video generation endpoints are not built"),
    "endpoint.request_content_type": Unbuilt("only JSON request bodies are built", _is("application/json")),
    "endpoint.session_header": Unbuilt("a session affinity header is not built"),
    "endpoint.uuid_and_strip": Unbuilt("multimodal UUID stripping is not built"),
    "endpoint.reset_kv_cache": Unbuilt("KV-cache reset requests are not built"),
    "endpoint.server_profiler": Unbuilt("server profiler start/stop requests are not built"),
    "endpoint.auth_type": Unbuilt("SigV4 request signing is not built"),
    "endpoint.aws_region": Unbuilt("SigV4 request signing is not built"),
    "endpoint.aws_profile": Unbuilt("SigV4 request signing is not built"),
    "endpoint.aws_service": Unbuilt("SigV4 request signing is not built"),
    # -- datasets --------------------------------------------------------------------------------
    "datasets[].system_prompt": Unbuilt("system prompts are not built"),
    "datasets[].system_prompt_file": Unbuilt("system prompts are not built"),
    "datasets[].video": Unbuilt("synthetic video is not built", _inert_section({"batch_size": 0})),
    "datasets[].rankings": Unbuilt("ranking endpoints are not built"),
    "datasets[].synthesis": Unbuilt("trace re-synthesis is not built", _inert_section(
        {"speedup_ratio": 1.0, "prefix_len_multiplier": 1.0, "prefix_root_multiplier": 1,
         "prompt_len_multiplier": 1.0, "output_len_multiplier": 1.0, "allow_dataset_wrap": False})),
    "datasets[].cache_bust": Unbuilt("cache-bust markers are not built", _inert_section({"target": "none"})),
    "datasets[].prompts.cache_bust": Unbuilt("cache-bust markers are not built", _inert_section({"target": "none"})),
    "datasets[].prompts.corpus": Unbuilt("only the built-in prompt corpus exists", _is("sonnet")),
    "datasets[].prompts.random_range_ratio": Unbuilt("uniform ISL/OSL windows are not built"),
    "datasets[].prompts.random_corpus_style": Unbuilt("prompt corpus styles are not built", _is("vllm")),
    "datasets[].prefix_prompts.shared_system_length": Unbuilt("shared system prompts are not built"),
    "datasets[].prefix_prompts.user_context_length": Unbuilt("per-session user context prompts are not built"),
    "datasets[].trace_session_sample_ratio": Unbuilt(_TRACE, _is(1, 1.0)),
    "datasets[].inter_turn_delay_cap_seconds": Unbuilt(_TRACE),
    "datasets[].max_idle_gap_cap_seconds": Unbuilt(_TRACE),
    "datasets[].trace_idle_gap_cap_seconds": Unbuilt(_TRACE),
    "datasets[].replay_speedup": Unbuilt(_TRACE, _is(1, 1.0)),
    "datasets[].open_loop_replay": Unbuilt(_TRACE, _is(True)),
    "datasets[].open_loop_strict": Unbuilt(_TRACE),
    "datasets[].omit_kv_hints": Unbuilt(_TRACE),
    "datasets[].force_min_tokens": Unbuilt("pinning min_tokens to recorded output lengths is not built",
                                           lambda v: True),
    "datasets[].ignore_trace_delays": Unbuilt(_TRACE),
    "datasets[].use_think_time_only": Unbuilt(_TRACE),
    "datasets[].max_context_length": Unbuilt(_TRACE),
    "datasets[].prompt_batch_size": Unbuilt("several prompts per request of a file dataset are not built "
                                            "(a file's turn gives its own texts)", _is(1)),
    "datasets[].image_batch_size": Unbuilt("images in file datasets are not built"),
    "datasets[].audio_batch_size": Unbuilt("audio in file datasets are not built"),
    "datasets[].video_batch_size": Unbuilt("video in file datasets are not built"),
    "datasets[].hf_subset": Unbuilt("public datasets are not built"),
    "datasets[].hf_weka_dataset": Unbuilt("public datasets are not built"),
    "datasets[].filters": Unbuilt("public datasets are not built"),
    # -- phases ----------------------------------------------------------------------------------
    "phases[].concurrency_ramp.strategy": Unbuilt(_RAMP, _is("linear")),
    "phases[].rate_ramp.strategy": Unbuilt(_RAMP, _is("linear")),
    "phases[].prefill_ramp.strategy": Unbuilt(_RAMP, _is("linear")),
    "phases[].rate_series": Unbuilt("piecewise request-rate series are not built"),
    "phases[].sla": Unbuilt("per-phase SLA checks are not built"),
    "phases[].seamless": Unbuilt("seamless phase transitions (no drain between phases) are not built"),
    "phases[].timing_mode": Unbuilt("timing-mode overrides are not built"),
    "phases[].failed_request_threshold": Unbuilt("aborting on a failed-request ratio is not built"),
    "phases[].trajectory_start_min_ratio": Unbuilt(_AGENTIC, lambda v: True),
    "phases[].trajectory_start_max_ratio": Unbuilt(_AGENTIC, lambda v: True),
    "phases[].burst_phase_starts": Unbuilt(_AGENTIC),
    "phases[].system_idle_gap_cap_seconds": Unbuilt(_AGENTIC),
    "phases[].agentic_cache_warmup_duration": Unbuilt(_AGENTIC),
    "phases[].agentic_warmup_grace_period": Unbuilt(_AGENTIC),
    "phases[].adaptive_scale": Unbuilt(_ADAPTIVE),
    **{f"phases[].adaptive_{knob}": Unbuilt(_ADAPTIVE, lambda v: True) for knob in (
        "sustain_duration", "assessment_period", "min_completed_requests", "control_variable", "control_min",
        "control_max", "scale_strategy_type", "scale_step_policy", "scale_base_step",
        "scale_max_step_multiplier", "scale_step_percent")},
    # -- artifacts -------------------------------------------------------------------------------
    "artifacts.export_outputs_json": Unbuilt("outputs.json is not built"),
    # -- tokenizer, runtime, server metrics ------------------------------------------------------
    "tokenizer.revision": Unbuilt("tokenizers are read from local files, never downloaded", _is("main")),
    "tokenizer.trust_remote_code": Unbuilt("tokenizers with custom code are not built"),
    "tokenizer.apply_chat_template": Unbuilt("chat-template token counting is not built"),
    "runtime.service_run_type": Unbuilt("the run type follows the command (profile or kube profile)",
                                        _is("multiprocessing", "kubernetes")),
    "runtime.communication": Unbuilt("ZMQ transport settings are chosen by aiperf"),
    "runtime.api_port": Unbuilt("the api port is set with AIPERF_API_PORT"),
    "runtime.api_host": Unbuilt("the api host is set with AIPERF_API_PORT's listener"),
    "runtime.dataset_api_base_url": Unbuilt("the dataset URL is chosen by aiperf"),
    "runtime.stats_interval": Unbuilt("the realtime stats interval is fixed"),
    "gpu_telemetry.collector": Unbuilt("local GPU collectors (pynvml, amdsmi) are not built; DCGM endpoints are",
                                       _is("dcgm")),
    "gpu_telemetry.mode": Unbuilt("the realtime GPU telemetry dashboard is not built", _is("summary")),
    "gpu_telemetry.metrics_file": Unbuilt("replaying recorded GPU metrics from a file is not built"),
    "server_metrics.discovery": Unbuilt("discovering metrics endpoints in a cluster is not built",
                                        _inert_section({"mode": "auto", "timeout_seconds": 30.0})),
}
"""AIPerf fields we do not build, by path (see the module docstring)."""


def _matches(path: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    return len(path) == len(pattern) and all(p == q or (q.endswith("[]") and p.startswith(q[:-2] + "["))
                                            for p, q in zip(path, pattern, strict=True))


_PATTERNS = {tuple(key.split(".")): (key, entry) for key, entry in UNBUILT.items()}


def _walk(node: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], dict[str, Any], str]]:
    """(path of the key, the mapping holding it, the key) of every key in `node`, depth first."""
    if isinstance(node, dict):
        for key in list(node):
            here = (*path, str(key))
            yield here, node, key
            yield from _walk(node.get(key), here)
    elif isinstance(node, list) and path:
        for index, item in enumerate(node):
            yield from _walk(item, (*path[:-1], f"{path[-1]}[{index}]"))


def check_supported(body: dict[str, Any], *, prefix: str = "") -> None:
    """Drop the unbuilt fields of a normalized benchmark body whose values ask for nothing; raise
    `ConfigError` (`<prefix><path>: not supported (<reason>)`) for the first that asks for
    something. Changes `body` in place."""
    for path, holder, key in list(_walk(body, ())):
        for pattern, (_, entry) in _PATTERNS.items():
            if _matches(path, pattern) and key in holder:
                if not entry.inert(holder[key]):
                    where = ".".join(path)
                    raise ConfigError(f"{prefix}{where}: not supported ({entry.reason})")
                del holder[key]
                break
