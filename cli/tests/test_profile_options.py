"""The `aiperf profile` flags and the benchmark model cannot drift: every flag sets a model field,
the default its help states is the model's, AIPerf 0.13's spellings are accepted, and bad values
are one line naming the flag, before any process starts."""

from __future__ import annotations

import ast
import inspect
import re
import typing
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from aiperf.cli import profile_options
from aiperf.cli.benchmark_flags import build_benchmark
from aiperf.cli.main import main
from aiperf.cli.profile_options import FLAG_PATHS, LocalFlags, ProfileFlags, flag_fields
from aiperf.config import (
    Benchmark,
    ConcurrencyPhase,
    ConfigError,
    GammaPhase,
    Length,
    PoissonPhase,
    SyntheticDataset,
)

# Every spelling AIPerf 0.13 accepts for the flags we implement (inventory, section 1.2).
AIPERF_SPELLINGS = [
    "--model", "-m", "--model-names", "--url", "-u", "--endpoint-type", "--streaming", "--concurrency",
    "--request-rate", "--request-rate-mode", "--arrival-pattern", "--arrival-smoothness",
    "--request-count", "--num-requests", "--benchmark-duration", "--benchmark-grace-period",
    "--warmup-request-count", "--num-warmup-requests", "--request-timeout-seconds",
    "--request-cancellation-rate", "--request-cancellation-delay", "--fixed-schedule", "--isl",
    "--synthetic-input-tokens-mean", "--prompt-input-tokens-mean", "--isl-stddev",
    "--synthetic-input-tokens-stddev", "--osl", "--output-tokens-mean", "--prompt-output-tokens-mean",
    "--osl-stddev", "--output-tokens-stddev", "--isl-block-size", "--num-dataset-entries", "--num-prompts",
    "--conversation-turn-mean", "--conversation-turn-stddev", "--conversation-turn-delay-mean",
    "--conversation-turn-delay-stddev", "--num-prefix-prompts", "--prefix-prompt-pool-size",
    "--prefix-prompt-length", "--input-file", "--custom-dataset-type", "--tokenizer", "--random-seed",
    "--goodput", "--extra-inputs", "--header", "-H", "--api-key", "--use-legacy-max-tokens",
    "--use-server-token-count", "--artifact-dir", "--output-artifact-dir", "--ui", "--ui-type",
    "--workers-max", "--max-workers", "--record-processors", "--record-processor-service-count", "--export-level",
]


def _structs_in(hint: Any) -> list[type]:
    """The Struct types a field's type holds (through lists, unions and Annotated)."""
    if isinstance(hint, type) and issubclass(hint, msgspec.Struct):
        return [hint]
    return [t for arg in typing.get_args(hint) for t in _structs_in(arg)]


def _resolves(path: str) -> bool:
    """Whether `path` (FLAG_PATHS form: `phases.<kind>` is a phase, `dataset` the dataset) names a
    field of the model, on any member of a union (rate phases have `rate`, file datasets `path`)."""
    parts = re.sub(r"^dataset\.", "datasets.", path).split(".")
    types: list[type] = [Benchmark]
    for part in parts:
        if part in ("profiling", "warmup") and types and issubclass(types[0], msgspec.Struct) \
                and "rate" in {f for t in types for f in t.__struct_fields__} | {"requests"}:
            continue  # the phase of that kind
        hints = [typing.get_type_hints(t, include_extras=True).get(part) for t in types]
        found = [h for h in hints if h is not None]
        if not found and not (part == "type" and any(t.__struct_config__.tag_field == "type" for t in types)):
            return False
        types = [t for h in found for t in _structs_in(h)]
    return True


def _stated_defaults() -> dict[str, str]:
    """`(default: X)` from each flag's docstring, by field name."""
    tree = ast.parse(inspect.getsource(profile_options))
    out: dict[str, str] = {}
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name in ("ProfileFlags", "LocalFlags")):
        body = cls.body
        for node, doc in zip(body, body[1:], strict=False):
            if isinstance(node, ast.AnnAssign) and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant):
                text = " ".join(str(doc.value.value).split())
                if match := re.search(r"\(default: ([^)]*?)\)", text):
                    out[node.target.id] = match.group(1)  # type: ignore[union-attr]
    return out


def _model_default(path: str) -> Any:
    built = build_benchmark(ProfileFlags(model=["m"]), LocalFlags(ui="none")).benchmark
    node: Any = msgspec.to_builtins(built)
    for part in path.replace("phases.profiling", "phases.-1").replace("dataset.", "datasets.0.").split("."):
        node = node[int(part)] if isinstance(node, list) else node.get(part)
    return node


def test_every_flag_maps_to_a_model_field_and_back() -> None:
    assert sorted(FLAG_PATHS) == sorted(flag_fields())
    for field, path in FLAG_PATHS.items():
        assert not path or _resolves(path), (field, path)  # "": a secret, never in the model
    assert not _resolves("phases.profiling.nonsense") and not _resolves("dataset.prompts.isl.skew")
    mapped = set(FLAG_PATHS.values())
    file_only = {"phases.profiling.name", "phases.profiling.kind", "dataset.name", "dataset.random_seed",
                 "dataset.prompts", "endpoint", "tokenizer", "artifacts", "runtime", "logging", "gpu_telemetry",
                 "variables"}
    for name in msgspec.structs.fields(Benchmark):  # every top-level section is reachable from a flag
        assert any(p == name.name or p.startswith(name.name + ".") or p.startswith(name.name.rstrip("s") + ".")
                   for p in mapped | file_only), name.name


RULES = {"model", "ui", "workers_max", "record_processors", "request_count", "fixed_schedule"}
"""Flags whose default is a rule (required, the terminal, the CPUs, the concurrency, the phase type)."""


def _derived_default(field: str) -> Any:
    """The model's default behind flags that do not map one-to-one onto a default field value."""
    match field:
        case "request_rate_mode":
            return msgspec.to_builtins(PoissonPhase(rate=1, requests=1))["type"]
        case "arrival_smoothness":
            return GammaPhase(rate=1, requests=1).smoothness
        case "isl_block_size":
            from aiperf.dataset import MOONCAKE_BLOCK_SIZE

            return MOONCAKE_BLOCK_SIZE
        case "benchmark_grace_period":
            return ConcurrencyPhase(duration=1).grace_s
        case "osl_stddev":
            return Length(mean=1).stddev  # osl itself is unset by default
        case "warmup_request_count":
            return 0  # no warmup phase at all
        case "url":
            return _model_default(FLAG_PATHS[field])[0]
        case "server_metrics_formats":
            return " ".join(_model_default(FLAG_PATHS[field]))
    return _model_default(FLAG_PATHS[field])


@pytest.mark.parametrize(("field", "stated"), sorted(_stated_defaults().items()))
def test_the_default_a_flag_states_is_the_models(field: str, stated: str) -> None:
    if field in RULES or stated.startswith("--"):
        pytest.skip("the default is a rule, stated in words, or another flag's value")
    value = _derived_default(field)
    assert str(value).lower() == stated.lower(), (field, value, stated)


def test_every_aiperf_spelling_is_accepted() -> None:
    from aiperf.cli.app import build_app

    help_text = _help_of(build_app(), ["profile", "--help"])
    for spelling in AIPERF_SPELLINGS:
        assert re.search(rf"(?<![\w-]){re.escape(spelling)}(?![\w-])", help_text), spelling


def _help_of(app: Any, argv: list[str]) -> str:
    import contextlib
    import io

    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, width=400, color_system=None)
    with contextlib.suppress(SystemExit):
        app(argv, console=console)
    return buffer.getvalue()


def test_flags_become_the_model_with_secrets_apart() -> None:
    built = build_benchmark(ProfileFlags(
        model=["m"], url=["vllm:8000/"], concurrency=4, osl=64, goodput="request_latency:250",
        extra_inputs=["temperature:0.5"], header=["X-B: 2", "X-A:1"], api_key="sk-x"), LocalFlags(ui="none"))
    b = built.benchmark
    assert b.endpoint.url == "http://vllm:8000" and b.model == "m"
    assert b.dataset.prompts.osl is not None and b.dataset.prompts.osl.mean == 64
    assert b.profiling == ConcurrencyPhase(concurrency=4, requests=10)
    assert (b.slos, b.endpoint.extra) == ({"request_latency": 250.0}, {"temperature": 0.5})
    assert b.endpoint.header_names == ["X-A", "X-B"] and b.runtime.ui == "none"
    assert built.secrets.headers == {"X-B": "2", "X-A": "1"} and built.secrets.api_key == "sk-x"
    assert "sk-x" not in msgspec.json.encode(b).decode() and '"2"' not in msgspec.json.encode(b).decode()


def test_load_flags_pick_the_phase() -> None:
    def profiling(**flags: Any) -> Any:
        return build_benchmark(ProfileFlags(model=["m"], **flags), LocalFlags(ui="none")).benchmark.phases

    assert profiling(concurrency=8) == [ConcurrencyPhase(concurrency=8, requests=16)]
    (rate,) = profiling(request_rate=5.0, concurrency=2, benchmark_duration=30)
    assert rate == PoissonPhase(rate=5.0, concurrency=2, duration=30)
    assert rate.grace_s == 30.0
    warm, prof = profiling(request_rate=5.0, request_rate_mode="gamma", arrival_smoothness=2.0,
                           warmup_request_count=3)
    # AIPerf's CLI: the warmup takes the profiling load (here a gamma rate, no concurrency cap)
    assert warm == GammaPhase(name="warmup", rate=5.0, smoothness=2.0, requests=3)
    assert (type(prof).__name__, prof.smoothness, prof.requests) == ("GammaPhase", 2.0, 10)  # type: ignore[union-attr]


def test_a_config_file_is_read_and_flags_override_it(tmp_path: Path) -> None:
    path = tmp_path / "bench.yaml"
    path.write_text(yaml.safe_dump({
        "schemaVersion": "2.0", "random_seed": 9,
        "benchmark": {
            "model": "Qwen/Qwen3-0.6B",
            "endpoint": {"url": "http://vllm:8000", "streaming": True, "headers": {"X-Tenant": "t1"},
                         "apiKey": "sk-file"},
            "dataset": {"type": "synthetic", "entries": 50, "prompts": {"isl": 128, "osl": {"mean": 32}}},
            "phases": [{"name": "warmup", "type": "concurrency", "concurrency": 2, "requests": 4},
                       {"name": "profiling", "type": "poisson", "rate": 20, "duration": "2m",
                        "gracePeriod": 10}],
            "slos": {"time_to_first_token": 200},
        }}))
    built = build_benchmark(ProfileFlags(concurrency=3), LocalFlags(ui="none"), config_file=str(path))
    b = built.benchmark
    assert (b.model, b.endpoint.url, b.endpoint.streaming, b.random_seed) == (
        "Qwen/Qwen3-0.6B", "http://vllm:8000", True, 9)
    assert b.dataset == SyntheticDataset(entries=50, prompts=b.dataset.prompts)
    assert (b.dataset.prompts.isl.mean, b.dataset.prompts.osl.mean) == (128, 32)  # type: ignore[union-attr]
    assert b.profiling == PoissonPhase(rate=20, duration=120, grace_period=10, concurrency=3)
    assert b.warmup is not None and b.warmup.requests == 4
    assert b.endpoint.header_names == ["X-Tenant"] and built.secrets.headers == {"X-Tenant": "t1"}
    assert built.secrets.api_key == "sk-file" and b.slos == {"time_to_first_token": 200}
    again = build_benchmark(ProfileFlags(request_count=7), LocalFlags(ui="none"), config_file=str(path))
    assert again.benchmark.profiling.requests == 7 and again.benchmark.profiling.duration is None


@pytest.mark.parametrize(("content", "message"), [
    ({"benchmark": {"model": "m", "phases": {"type": "concurrency", "concurency": 8, "requests": 5}}},
     "phases[0]: unknown field 'concurency'"),
    ({"benchmark": {"model": "m"}, "sweep": {"type": "grid"}}, "sweep.parameters: a grid sweep needs parameters"),
    ({"schemaVersion": "1.0", "benchmark": {"model": "m"}}, "schemaVersion '1.0'"),
    ({"benchmark": {"model": "m", "phases": {"type": "poisson", "rate": -1, "requests": 5}}},
     "phases[0].rate: expected a number > 0.0"),
])
def test_a_bad_config_file_is_one_line(tmp_path: Path, content: dict[str, Any], message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(content))
    with pytest.raises(ConfigError) as info:
        build_benchmark(ProfileFlags(), config_file=str(path))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_any_valid_model_round_trips_through_run_config_json(tmp_path: Path) -> None:
    from aiperf.config import CommsOptions, RunConfig, dump_run_config, load_run_config

    built = build_benchmark(ProfileFlags(model=["m"], request_rate=3.0, warmup_request_count=2, osl=9),
                            LocalFlags(ui="none"))
    config = RunConfig(run_id="x", comms=CommsOptions(ipc_dir="/tmp"), benchmark=built.benchmark)
    dump_run_config(config, tmp_path / "run_config.json")
    assert load_run_config(tmp_path / "run_config.json") == config


@pytest.mark.parametrize(("argv", "error"), [
    (["--goodput", "oops"], "error: --goodput 'oops': expected METRIC:VALUE, e.g. request_latency:250\n"),
    (["--concurrency", "0"], "error: --concurrency 0: expected an integer >= 1\n"),
    (["--isl", "0"], "error: --isl 0: at least 1\n"),
    (["--goodput", "nope:5"], "error: --goodput: unknown value 'nope'"),
    (["--url", "http://h:abc"], "error: --url http://h:abc: expected a string in the form"),
    (["--url", "http://[::1"], "error: --url http://[::1: expected a string in the form"),
    (["--url", "http://h:99999"], "error: --url http://h:99999: expected a string in the form"),
    (["--request-rate-mode", "gamma"], "error: --request-rate: required\n"),
    (["--osl-stddev", "3"], "error: --osl-stddev 3.0: needs --osl\n"),
])
def test_bad_values_are_one_line_naming_the_flag(capsys: pytest.CaptureFixture[str], argv: list[str],
                                                  error: str) -> None:
    url = [] if "--url" in argv else ["--url", "127.0.0.1:9"]  # nothing listens: never reached
    assert main(["profile", "-m", "m", *url, *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(error) and err.count("\n") == 1, err


def test_bad_values_stop_before_any_service_process_exists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    import aiperf.system_controller.launcher as launcher

    async def no_processes(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a service process was started")

    monkeypatch.setattr(launcher.anyio, "open_process", no_processes)
    for argv in (["--isl", "0"], ["--goodput", "nope:1"], ["--url", "http://h:abc"], ["--url", "http://[::1"],
                 ["--url", "http://h:99999"]):
        artifacts = tmp_path / "a"
        assert main(["profile", "-m", "m", *argv, "--artifact-dir", str(artifacts)]) == 2
        assert capsys.readouterr().err.count("\n") == 1
        assert not artifacts.exists()  # not even run_config.json: validation came first


def test_config_schema_and_validate_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from aiperf.config import benchmark_schema

    assert main(["config", "schema"]) == 0
    assert json.loads(capsys.readouterr().out) == benchmark_schema()
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text("schemaVersion: '2.0'\nbenchmark:\n  model: m\n  phases: {type: concurrency, requests: 5}\n")
    bad.write_text("benchmark:\n  model: m\n  phases: {type: concurrency, requests: 0}\n")
    assert main(["config", "validate", str(good), str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == f"{good}: ok\n"
    assert err == f"error: {bad}: phases[0].requests: expected an integer >= 1\n"


def test_the_choices_of_the_flags_are_the_models() -> None:
    from aiperf.config import DatasetFormat, Endpoint, EndpointKind, ExportLevel, RatePhase, UserCentricPhase

    hints = typing.get_type_hints(ProfileFlags, include_extras=True)

    def choices(field: str) -> set[str]:
        hint = hints[field]
        while typing.get_origin(hint) is typing.Annotated or type(None) in typing.get_args(hint):
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
        return set(typing.get_args(hint))

    assert choices("endpoint_type") == set(EndpointKind)
    assert choices("custom_dataset_type") == set(DatasetFormat)
    assert choices("request_rate_mode") == {cls.__struct_config__.tag for cls in RatePhase.__subclasses__()
                                            if cls is not UserCentricPhase}  # --user-centric-rate
    assert choices("connection_reuse_strategy") == set(typing.get_args(typing.get_type_hints(Endpoint)["connection_reuse"]))
    local = typing.get_type_hints(LocalFlags, include_extras=True)["export_level"]
    assert set(typing.get_args(typing.get_args(typing.get_args(local)[0])[0])) == set(typing.get_args(ExportLevel))


def test_issuing_flag_picks_who_issues_the_credits(capsys: pytest.CaptureFixture[str]) -> None:
    from aiperf.cli.app import build_app
    from aiperf.config import Runtime

    def issuing(*argv: str) -> str:
        _, bound, _ = build_app().parse_args(["profile", "-m", "m", "--ui", "none", *argv], exit_on_error=False)
        return build_benchmark(bound.arguments["flags"], bound.arguments["local"]).benchmark.runtime.issuing

    assert issuing() == "central" == Runtime().issuing
    assert issuing("--issuing", "per_pod") == "per_pod"
    assert issuing("--issuing", "central") == "central"
    hint = typing.get_type_hints(LocalFlags, include_extras=True)["issuing"]
    flag_choices = set(typing.get_args(typing.get_args(typing.get_args(hint)[0])[0]))
    assert flag_choices == set(typing.get_args(typing.get_type_hints(Runtime)["issuing"])) == {"central", "per_pod"}
    with pytest.raises(SystemExit) as exited:  # cyclopts refuses a choice not offered, as for --ui
        main(["profile", "-m", "m", "--url", "127.0.0.1:9", "--issuing", "sideways"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert '"sideways" for --issuing' in err and '"per_pod"' in err, err


def test_server_metrics_flags() -> None:
    from aiperf.cli.app import build_app
    from aiperf.servermetrics.endpoints import endpoints_of

    _, bound, _ = build_app().parse_args(["profile", "--model", "m", "--url", "srv:8000", "--server-metrics",
                                          "b:9400", "http://c:9/x"], exit_on_error=False)
    on = build_benchmark(bound.arguments["flags"], LocalFlags(ui="none")).benchmark
    assert on.server_metrics.enabled and on.server_metrics.urls == ["http://b:9400", "http://c:9/x"]
    assert endpoints_of(on) == ["http://srv:8000/metrics", "http://b:9400/metrics", "http://c:9/x"]
    default = build_benchmark(ProfileFlags(model=["m"]), LocalFlags(ui="none")).benchmark
    assert endpoints_of(default) == ["http://localhost:8000/metrics"]  # on by default, like AIPerf
    off = build_benchmark(ProfileFlags(model=["m"], no_server_metrics=True), LocalFlags(ui="none")).benchmark
    assert not off.server_metrics.enabled and endpoints_of(off) == []
