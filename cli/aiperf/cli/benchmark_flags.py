"""How the benchmark flags change a benchmark document (`aiperf.cli.profile_options`): the flag
semantics of AIPerf 0.13's `profile`, written once.

The profiling phase's type follows the load flags: `--fixed-schedule` replays timestamps,
`--request-rate` (with `--request-rate-mode`, default poisson) is an open loop, otherwise a
closed loop at `--concurrency`. A flag that sets a stop condition replaces the file's other one.
When the profiling phase comes from flags alone and neither a count nor a duration is given, it
sends max(10, 2 x concurrency) requests (AIPerf's CLI default). `--warmup-request-count N` adds
a closed-loop warmup of N requests at the profiling concurrency (0 removes it).
"""

from __future__ import annotations

import copy
import re
import sys
from dataclasses import dataclass
from typing import Any

import msgspec

from aiperf.cli.profile_args import (
    FlagError,
    normalize_url,
    parse_extra_inputs,
    parse_goodput,
    parse_gpu_telemetry,
    parse_headers,
    parse_server_metrics_formats,
)
from aiperf.cli.profile_options import FLAG_PATHS, LocalFlags, ProfileFlags, flag_name
from aiperf.config import (
    Benchmark,
    ConfigError,
    Prompts,
    Secrets,
    SyntheticDataset,
    decode_benchmark,
    normalize,
)
from aiperf.config.benchmark import GOODPUT_METRICS, prefix_base
from aiperf.config.loader import read_document, split_credentials
from aiperf.config.sweep import Variation, apply_values, split_sweep_blocks

RATE_TYPES = ("poisson", "gamma", "constant")
_ROLES = ("warmup", "profiling")


@dataclass(frozen=True, kw_only=True)
class BuiltBenchmark:
    """What the flags mean: the validated `benchmark` (safe to write to disk) and the secrets
    kept out of it."""

    benchmark: Benchmark
    secrets: Secrets


def build_benchmark(flags: ProfileFlags, local: LocalFlags | None = None, *,
                    config_file: str | None = None, variation: Variation | None = None) -> BuiltBenchmark:
    """The benchmark the flags describe: the AIPerf config v2 file `config_file` (if any; its
    `${VAR}` references and Jinja2 templates resolved), each given flag overriding it, AIPerf's CLI
    defaults for what neither says, validated by the model. `variation` (a sweep's caller,
    `aiperf.cli.sweep_run`) is applied to the file's document (its scenario, its dotted paths)
    before the flags apply; the file's `sweep:`/`multi_run:` blocks are always the caller's.

    Raises `aiperf.config.ConfigError` with one line naming the flag (or the file and field)
    for any malformed or invalid value. Pure: no I/O besides reading `config_file` and `isatty`.
    """
    document: dict[str, Any] = {}
    secrets = Secrets()
    source = ""
    if config_file is not None:
        raw, _, _ = split_sweep_blocks(read_document(config_file), source=config_file)
        document, secrets = normalize(raw)
        if variation is not None:
            document = apply_values(document, variation.values, variation.overlay)
        source = config_file
    try:
        document, secrets = apply_flags(document, secrets, flags, local or LocalFlags())
    except FlagError as exc:
        raise ConfigError(str(exc)) from None
    if not document.get("models"):
        raise ConfigError("--model: required (or give the model in --config)")
    try:
        benchmark = decode_benchmark(document, source=source)
    except ConfigError as exc:
        given = {f for f in FLAG_PATHS for group in (flags, local) if getattr(group, f, None) is not None}
        raise ConfigError(_name_flag(str(exc), source, document, given)) from None
    if benchmark.runtime.ui is None:
        ui = "dashboard" if sys.stdout.isatty() else "none"
        benchmark = msgspec.structs.replace(benchmark, runtime=msgspec.structs.replace(benchmark.runtime, ui=ui))
    return BuiltBenchmark(benchmark=benchmark, secrets=secrets)


def _name_flag(message: str, source: str, document: dict[str, Any], given: set[str]) -> str:
    """`[<source>: ]<field path>: <reason>` as `--flag VALUE: <reason>` when a flag that sets that
    field was `given` (or no config file was: then every value comes from a flag or a default)."""
    rest = message.removeprefix(f"{source}: ") if source else message
    where, sep, what = rest.partition(": ")
    found = flag_for_path(where, document, given if source else None) if sep else None
    if found is None:
        return message
    field, value = found
    if field == "goodput":
        what += f" (metrics: {', '.join(GOODPUT_METRICS)})"
    return f"{flag_name(field)} {value}: {what}" if value is not None else f"{flag_name(field)}: {what}"


def _role(phase: dict[str, Any]) -> str:
    return str(phase.get("kind") or phase.get("name") or "profiling")


def _set(section: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        section[key] = value


def _sub(parent: dict[str, Any], key: str) -> dict[str, Any]:
    child = parent.get(key)
    if not isinstance(child, dict):
        child = parent[key] = {}
    return child


def apply_flags(document: dict[str, Any], secrets: Secrets, flags: ProfileFlags,
                local: LocalFlags) -> tuple[dict[str, Any], Secrets]:
    """`document` (a normalized benchmark document, not changed) with every given flag applied,
    and `secrets` with `--header` values and `--api-key` added. Raises `FlagError` for a
    malformed flag value or a flag that needs another one."""
    doc = copy.deepcopy(document)
    if flags.model is not None:
        given = [flags.model] if isinstance(flags.model, str) else flags.model  # a str from code, not the CLI
        doc["models"] = [name.strip() for names in given for name in names.split(",")]
    if flags.model_selection_strategy is not None:
        doc["model_selection"] = {**_sub(doc, "model_selection"), "strategy": flags.model_selection_strategy}
    headers = {**secrets.headers, **parse_headers(flags.header or [])}
    _endpoint(doc, flags, headers)
    _dataset(doc, flags)
    _phases(doc, flags)
    if flags.goodput is not None:
        doc["slos"] = {**_sub(doc, "slos"), **parse_goodput(flags.goodput)}
    if flags.tokenizer is not None:
        _sub(doc, "tokenizer")["name"] = flags.tokenizer
    _set(doc, "random_seed", flags.random_seed)
    if flags.server_metrics is not None:
        _sub(doc, "server_metrics")["urls"] = [normalize_url(u) for u in flags.server_metrics]
    if flags.no_server_metrics:
        _sub(doc, "server_metrics")["enabled"] = False
    for field, key in (("export_http_trace", "trace"), ("show_trace_timing", "show_trace_timing")):
        if (value := getattr(flags, field)) is not None:
            _sub(doc, "artifacts")[key] = value
    if flags.server_metrics_formats is not None:
        _sub(doc, "server_metrics")["formats"] = parse_server_metrics_formats(flags.server_metrics_formats)
    if flags.gpu_telemetry is not None:
        _sub(doc, "gpu_telemetry")["urls"] = parse_gpu_telemetry(flags.gpu_telemetry)
    if flags.no_gpu_telemetry:
        _sub(doc, "gpu_telemetry")["enabled"] = False
    if local.artifact_dir is not None:
        _sub(doc, "artifacts")["dir"] = local.artifact_dir
    if local.keep_dataset_files is not None:
        _sub(doc, "artifacts")["keep_dataset"] = local.keep_dataset_files
    if local.export_level is not None:
        _sub(doc, "artifacts")["export_level"] = local.export_level
    if flags.slice_duration is not None:
        _sub(doc, "artifacts")["slice_duration"] = flags.slice_duration
    if flags.profile_export_prefix is not None:
        prefix = flags.profile_export_prefix
        if not prefix or any(c in prefix for c in "/\\") or any(c.isspace() for c in prefix) \
                or not prefix_base(prefix):
            raise FlagError(f"--profile-export-prefix {prefix!r}: a file name base without / or spaces "
                            "(e.g. run1; the files go into --artifact-dir)")
        _sub(doc, "artifacts")["prefix"] = prefix
    for field, key in (("ui", "ui"), ("workers_max", "workers"), ("record_processors", "record_processors"),
                       ("issuing", "issuing"), ("aggregation", "aggregation")):
        if (value := getattr(local, field)) is not None:
            _sub(doc, "runtime")[key] = value
    api_key = flags.api_key if flags.api_key is not None else secrets.api_key
    return doc, Secrets(api_key=api_key, headers=headers)


def _endpoint(doc: dict[str, Any], flags: ProfileFlags, headers: dict[str, str]) -> None:
    endpoint = _sub(doc, "endpoint")
    if flags.url is not None:
        given = [u.strip() for value in flags.url for u in value.split(",") if u.strip()]
        if not given:
            raise FlagError("--url: give at least one URL")
        endpoint["urls"] = []
        for url, authorization in (split_credentials(normalize_url(u)) for u in given):
            endpoint["urls"].append(url)
            if authorization is None:
                continue
            if "Authorization" in headers and headers["Authorization"] != authorization or flags.api_key is not None:
                raise FlagError("--url: carries credentials while --api-key, --header or another --url sets "
                                "Authorization too; give them one way")
            headers["Authorization"] = authorization
    if flags.url_strategy is not None:
        endpoint["url_strategy"] = flags.url_strategy.replace("-", "_")
    if flags.custom_endpoint is not None:
        path = flags.custom_endpoint.strip()
        if path and not path.startswith("/"):
            raise FlagError(f"--custom-endpoint {path}: must start with / (e.g. /{path}), as in AIPerf")
        endpoint["path"] = path  # "": nothing appended
    _set(endpoint, "type", flags.endpoint_type)
    _set(endpoint, "streaming", flags.streaming)
    _set(endpoint, "timeout", flags.request_timeout_seconds)
    _set(endpoint, "connection_reuse", flags.connection_reuse_strategy)
    _wait_for_model(endpoint, flags)
    _set(endpoint, "use_legacy_max_tokens", flags.use_legacy_max_tokens)
    _set(endpoint, "use_server_token_count", flags.use_server_token_count)
    if flags.extra_inputs is not None:
        endpoint["extra"] = {**_sub(endpoint, "extra"), **parse_extra_inputs(flags.extra_inputs)}
    if headers:
        names = endpoint.get("header_names")
        endpoint["header_names"] = sorted({*(names if isinstance(names, list) else []), *headers})


def _dataset(doc: dict[str, Any], flags: ProfileFlags) -> None:
    datasets = doc.get("datasets") or [{"name": "main", "type": "synthetic"}]  # AIPerf's CLI name
    if not isinstance(datasets, list) or not isinstance(datasets[0], dict):
        return  # not a dataset at all: the model names the field
    dataset = doc["datasets"] = [dict(datasets[0]), *datasets[1:]]
    spec = dataset[0]
    if flags.input_file is not None:
        if spec.get("type") != "file":
            spec = dataset[0] = {k: v for k, v in spec.items() if k in ("name", "entries", "prompts", "random_seed")}
        spec.update(type="file", path=flags.input_file)
    if flags.custom_dataset_type is not None:
        if spec.get("type") != "file":
            raise FlagError(f"--custom-dataset-type {flags.custom_dataset_type}: needs --input-file")
        spec["format"] = flags.custom_dataset_type
    prompts = _sub(spec, "prompts")
    if (flags.isl is not None or flags.isl_stddev is not None) and spec.get("type") == "file":
        given = "--isl" if flags.isl is not None else "--isl-stddev"
        raise FlagError(f"{given}: only for synthetic prompts; a file dataset brings its own (as in AIPerf)")
    if flags.isl is not None or flags.isl_stddev is not None:
        if not isinstance(prompts.get("isl"), dict):
            prompts["isl"] = {"mean": Prompts().isl.mean}
        isl = prompts["isl"]
        _set(isl, "mean", flags.isl)
        _set(isl, "stddev", flags.isl_stddev)
    if flags.osl is not None:
        _sub(prompts, "osl")["mean"] = flags.osl
    if flags.osl_stddev is not None:
        if not isinstance(prompts.get("osl"), dict):
            raise FlagError(f"--osl-stddev {flags.osl_stddev}: needs --osl")
        prompts["osl"]["stddev"] = flags.osl_stddev
    _set(prompts, "block_size", flags.isl_block_size)
    _set(prompts, "batch_size", flags.prompt_batch_size)
    if not prompts:
        spec.pop("prompts")
    _set(spec, "entries", flags.num_dataset_entries)
    if (flags.request_count or 0) >= 1 and "entries" not in spec and spec.get("type", "synthetic") == "synthetic":
        spec["entries"] = flags.request_count  # AIPerf's CLI: one distinct prompt per request
    _media(spec, flags)
    _set(spec, "turn_delay_ratio", flags.conversation_turn_delay_ratio)
    for field, key, attr in (("conversation_turn_mean", "turns", "mean"),
                             ("conversation_turn_stddev", "turns", "stddev"),
                             ("conversation_turn_delay_mean", "turn_delay", "mean"),
                             ("conversation_turn_delay_stddev", "turn_delay", "stddev"),
                             ("num_prefix_prompts", "prefix_prompts", "pool_size"),
                             ("prefix_prompt_length", "prefix_prompts", "length")):
        if (value := getattr(flags, field)) is not None:
            if not isinstance(spec.get(key), dict):
                spec[key] = msgspec.to_builtins(getattr(SyntheticDataset(), key))
            spec[key][attr] = value


def _media(spec: dict[str, Any], flags: ProfileFlags) -> None:
    """The `--image-*` and `--audio-*` flags into the dataset's `images` and `audio`."""
    for section, fields in (("images", (("image_batch_size", ("batch_size",)), ("image_width_mean", ("width", "mean")),
                                        ("image_width_stddev", ("width", "stddev")),
                                        ("image_height_mean", ("height", "mean")),
                                        ("image_height_stddev", ("height", "stddev")),
                                        ("image_format", ("format",)))),
                            ("audio", (("audio_batch_size", ("batch_size",)), ("audio_length_mean", ("length", "mean")),
                                       ("audio_length_stddev", ("length", "stddev")), ("audio_format", ("format",)),
                                       ("audio_sample_rates", ("sample_rates",)), ("audio_depths", ("depths",)),
                                       ("audio_num_channels", ("channels",))))):
        for field, path in fields:
            if (value := getattr(flags, field)) is None:
                continue
            node = _sub(spec, section)
            if len(path) == 2:
                if not isinstance(node.get(path[0]), dict):
                    default = msgspec.to_builtins(getattr(getattr(SyntheticDataset(), section), path[0]))
                    node[path[0]] = {"mean": default["mean"]}
                node = node[path[0]]
            node[path[-1]] = value


def _phases(doc: dict[str, Any], flags: ProfileFlags) -> None:
    listed = doc.get("phases") or []
    if not isinstance(listed, list):
        return  # not a list of phases: the model names the field
    phases = [dict(p) for p in listed if isinstance(p, dict)]
    by_role = {_role(p): p for p in phases}
    from_file = "profiling" in by_role
    prof = by_role.get("profiling", {"name": "profiling"})
    if flags.user_centric_rate is not None and (flags.request_rate is not None or flags.fixed_schedule):
        raise FlagError(f"--user-centric-rate {flags.user_centric_rate:g}: not with --request-rate or "
                        "--fixed-schedule (give one load mode)")
    if flags.fixed_schedule:
        prof["type"] = "fixed_schedule"
        for key in ("rate", "smoothness", "requests"):
            prof.pop(key, None)
    elif flags.request_rate is not None or flags.request_rate_mode is not None:
        current = prof.get("type")
        prof["type"] = flags.request_rate_mode or (current if current in RATE_TYPES else "poisson")
        _set(prof, "rate", flags.request_rate)
    elif flags.user_centric_rate is not None:
        prof["type"] = "user_centric"
        prof["rate"] = flags.user_centric_rate
    elif flags.fixed_schedule is False and prof.get("type") == "fixed_schedule":
        prof["type"] = "concurrency"
    prof.setdefault("type", "concurrency")
    if prof["type"] != "gamma":
        prof.pop("smoothness", None)
    if flags.fixed_schedule_auto_offset is not None:
        if prof["type"] != "fixed_schedule":
            raise FlagError("--fixed-schedule-auto-offset: only with --fixed-schedule")
        prof["auto_offset"] = flags.fixed_schedule_auto_offset
    for flag, key, value in (("--fixed-schedule-start-offset", "start_offset", flags.fixed_schedule_start_offset),
                             ("--fixed-schedule-end-offset", "end_offset", flags.fixed_schedule_end_offset)):
        if value is None:
            continue
        if prof["type"] != "fixed_schedule":
            raise FlagError(f"{flag} {value}: only with --fixed-schedule")
        if value < 0:
            raise FlagError(f"{flag} {value}: must be >= 0 (ms)")
        prof[key] = value
    if flags.fixed_schedule_start_offset is not None:
        if flags.fixed_schedule_auto_offset:
            raise FlagError("--fixed-schedule-start-offset: not with --fixed-schedule-auto-offset (the replay "
                            "starts at the start offset)")
        prof["auto_offset"] = False
    if prof.get("start_offset") is not None and prof.get("end_offset") is not None \
            and prof["start_offset"] > prof["end_offset"]:
        raise FlagError(f"--fixed-schedule-start-offset {prof['start_offset']}: after --fixed-schedule-end-offset "
                        f"{prof['end_offset']}")
    if flags.arrival_smoothness is not None:
        if prof["type"] != "gamma":
            raise FlagError(f"--arrival-smoothness {flags.arrival_smoothness:g}: only with "
                            "--request-rate-mode gamma")
        prof["smoothness"] = flags.arrival_smoothness
    if flags.num_users is not None:
        if prof["type"] != "user_centric":
            raise FlagError(f"--num-users {flags.num_users}: needs --user-centric-rate")
        prof["users"] = flags.num_users
    elif flags.user_centric_rate is not None and "users" not in prof:
        raise FlagError(f"--user-centric-rate {flags.user_centric_rate:g}: needs --num-users")
    if prof["type"] != "user_centric":
        prof.pop("users", None)
    _set(prof, "concurrency", flags.concurrency)
    _set(prof, "prefill_concurrency", flags.prefill_concurrency)
    for key, seconds in (("concurrency_ramp", flags.concurrency_ramp_duration),
                         ("rate_ramp", flags.request_rate_ramp_duration),
                         ("prefill_ramp", flags.prefill_concurrency_ramp_duration)):
        if seconds is not None:
            prof[key] = {"duration": seconds}
    if flags.request_count is not None:
        prof["requests"] = flags.request_count
        prof.pop("duration", None)
        prof.pop("grace_period", None)
    if flags.benchmark_duration is not None:
        prof["duration"] = flags.benchmark_duration
        prof.pop("requests", None)
    _set(prof, "grace_period", flags.benchmark_grace_period)
    if flags.request_cancellation_rate is not None or flags.request_cancellation_delay is not None:
        cancellation = _sub(prof, "cancellation")
        _set(cancellation, "rate", flags.request_cancellation_rate)
        _set(cancellation, "delay", flags.request_cancellation_delay)
    if (not from_file and prof["type"] != "fixed_schedule"
            and "requests" not in prof and "duration" not in prof):
        prof["requests"] = max(10, 2 * int(prof.get("concurrency") or 1))
    warmup = _warmup(by_role.get("warmup"), prof, flags)
    others = [p for p in phases if _role(p) not in _ROLES]
    doc["phases"] = [*others, *([warmup] if warmup else []), prof]


_WARMUP_FALLBACKS = (
    ("concurrency_ramp", "warmup_concurrency_ramp_duration", "concurrency_ramp_duration"),
    ("prefill_ramp", "warmup_prefill_concurrency_ramp_duration", "prefill_concurrency_ramp_duration"),
    ("rate_ramp", "warmup_request_rate_ramp_duration", "request_rate_ramp_duration"),
)
_WARMUP_SHAPE = ("warmup_concurrency", "warmup_request_rate", "warmup_arrival_pattern", "warmup_prefill_concurrency",
                 "warmup_grace_period", *(own for _, own, _ in _WARMUP_FALLBACKS))


def _warmup(existing: dict[str, Any] | None, prof: dict[str, Any], flags: ProfileFlags) -> dict[str, Any] | None:
    """The warmup phase, as AIPerf's CLI derives it: `--warmup-request-count` and/or
    `--warmup-duration` make one (a count of 0 alone removes it); its load is the `--warmup-*`
    flag, else the profiling flag (`--request-rate` makes it an open loop, else a closed loop at
    `--concurrency`). A config file's warmup phase keeps what no `--warmup-*` flag changes. Other
    `--warmup-*` flags need a warmup phase (AIPerf would drop them silently: we say so)."""
    if flags.warmup_request_count == 0 and flags.warmup_duration is None:
        return None
    triggered = flags.warmup_request_count is not None or flags.warmup_duration is not None
    if existing is None and not triggered:
        given = [f for f in _WARMUP_SHAPE if getattr(flags, f) is not None]
        if given:
            raise FlagError(f"{flag_name(given[0])}: needs --warmup-request-count or --warmup-duration")
        return None
    if existing is not None:
        warmup = dict(existing)
        _set(warmup, "concurrency", flags.warmup_concurrency)
        _set(warmup, "rate", flags.warmup_request_rate)
        if flags.warmup_arrival_pattern is not None:
            warmup["type"] = flags.warmup_arrival_pattern
        elif flags.warmup_request_rate is not None and warmup.get("type") not in RATE_TYPES:
            warmup["type"] = "poisson"
    else:
        rate = flags.warmup_request_rate if flags.warmup_request_rate is not None else flags.request_rate
        concurrency = flags.warmup_concurrency if flags.warmup_concurrency is not None else flags.concurrency
        warmup = {"name": "warmup"}
        if rate is not None:
            pattern = flags.warmup_arrival_pattern or flags.request_rate_mode or "poisson"
            warmup.update(type=pattern, rate=rate)
            if pattern == "gamma" and flags.arrival_smoothness is not None:
                warmup["smoothness"] = flags.arrival_smoothness
            _set(warmup, "concurrency", concurrency)
        else:
            if flags.warmup_arrival_pattern is not None:
                raise FlagError(f"--warmup-arrival-pattern {flags.warmup_arrival_pattern}: needs "
                                "--warmup-request-rate or --request-rate")
            warmup.update(type="concurrency", concurrency=concurrency or int(prof.get("concurrency") or 1))
    if flags.warmup_request_count:
        warmup["requests"] = flags.warmup_request_count
    _set(warmup, "duration", flags.warmup_duration)
    prefill = flags.warmup_prefill_concurrency
    _set(warmup, "prefill_concurrency", prefill if prefill is not None else flags.prefill_concurrency)
    for key, own, fallback in _WARMUP_FALLBACKS:
        seconds = getattr(flags, own)
        if seconds is None:
            seconds = getattr(flags, fallback)
            if key == "rate_ramp" and "rate" not in warmup:
                continue  # a profiling rate ramp has nothing to ramp in a closed-loop warmup
        elif key == "rate_ramp" and "rate" not in warmup:
            raise FlagError(f"{flag_name(own)} {seconds:g}: needs --warmup-request-rate or --request-rate")
        if seconds is not None:
            warmup[key] = {"duration": seconds}
    if flags.warmup_grace_period is not None:
        if "duration" not in warmup:
            raise FlagError(f"--warmup-grace-period {flags.warmup_grace_period:g}: needs --warmup-duration")
        warmup["grace_period"] = flags.warmup_grace_period
    return warmup


def flag_for_path(where: str, document: dict[str, Any],
                  given: set[str] | None = None) -> tuple[str, Any] | None:
    """(flag field, the value it gave) for an error at field path `where` (msgspec's form, e.g.
    `phases[1].concurrency`, `datasets[0].prompts.isl.mean`, `endpoint.urls[0]`), or None when
    no flag sets that field (among `given` flags, when given). For a field set by several flags
    the first one is named."""
    symbolic = _symbolic(where, document)
    for field, path in FLAG_PATHS.items():
        if path and symbolic in (path, f"{path}[0]") and (given is None or field in given):
            return field, _value_at(document, where)
    return None


def _symbolic(where: str, document: dict[str, Any]) -> str:
    """`phases[1].x` -> `phases.<its kind>.x`; `datasets[0].x` -> `dataset.x`; ` (a key)` dropped."""
    where = where.removesuffix(" (a key)")
    phases = document.get("phases") or []

    def phase(match: re.Match[str]) -> str:
        i = int(match.group(1))
        return f"phases.{_role(phases[i])}" if i < len(phases) and isinstance(phases[i], dict) else match.group(0)

    where = re.sub(r"^phases\[(\d+)\]", phase, where)
    return re.sub(r"^datasets\[0\]", "dataset", where)


def _value_at(document: dict[str, Any], where: str) -> Any:
    node: Any = document
    for token in re.findall(r"[^.\[\]]+|\[\d+\]", where.removesuffix(" (a key)")):
        if token.startswith("["):
            index = int(token[1:-1])
            node = node[index] if isinstance(node, list) and index < len(node) else None
        else:
            node = node.get(token) if isinstance(node, dict) else None
        if node is None:
            return None
    return node if not isinstance(node, dict | list) else None


def _wait_for_model(endpoint: dict[str, Any], flags: ProfileFlags) -> None:
    """`--wait-for-model-timeout/-mode/-interval` (AIPerf 0.13.0's readiness probe): a
    negative timeout, a non-positive interval, or a mode or interval other than the default
    without a positive timeout is an error, as in AIPerf."""
    if flags.wait_for_model_timeout is not None and flags.wait_for_model_timeout < 0:
        raise FlagError(f"--wait-for-model-timeout {flags.wait_for_model_timeout:g}: must be >= 0 (0: no wait)")
    if flags.wait_for_model_interval is not None and flags.wait_for_model_interval <= 0:
        raise FlagError(f"--wait-for-model-interval {flags.wait_for_model_interval:g}: must be > 0")
    _set(endpoint, "wait_for_model_timeout", flags.wait_for_model_timeout)
    _set(endpoint, "wait_for_model_interval", flags.wait_for_model_interval)
    _set(endpoint, "wait_for_model_mode", flags.wait_for_model_mode)
    if not endpoint.get("wait_for_model_timeout"):
        unused = [flag for flag, value, default in (("--wait-for-model-interval", flags.wait_for_model_interval, 5.0),
                                                    ("--wait-for-model-mode", flags.wait_for_model_mode, "inference"))
                  if value is not None and value != default]
        if unused:
            raise FlagError(f"{', '.join(unused)}: no effect unless --wait-for-model-timeout is positive")
