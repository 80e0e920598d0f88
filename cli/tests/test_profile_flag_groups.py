"""AIPerf 0.13's flag groups beyond the basics mean what AIPerf's CLI makes of them: custom
endpoint and URL strategy, synthetic multi-turn and prefix aliases, warmup variants, trace replay
offsets, server-metrics formats, GPU telemetry, time slices (issue 25)."""

from __future__ import annotations

from typing import Any

import pytest

from aiperf.cli.app import build_app
from aiperf.cli.benchmark_flags import build_benchmark
from aiperf.cli.main import main
from aiperf.config import Benchmark, ConcurrencyPhase, ConstantPhase, GammaPhase, PoissonPhase
from aiperf.config.benchmark import Ramp


def built(*argv: str) -> Benchmark:
    """The benchmark `aiperf profile -m m ARGV...` describes (parsed by the real app)."""
    _, bound, _ = build_app().parse_args(["profile", "-m", "m", "--ui", "none", *argv], exit_on_error=False)
    return build_benchmark(bound.arguments["flags"], bound.arguments["local"]).benchmark


def test_custom_endpoint_and_url_strategy() -> None:
    for spelling in ("--custom-endpoint", "--endpoint"):
        bench = built("--url", "h:9", spelling, "/my-api/chat")
        assert bench.endpoint.path == "/my-api/chat"
        assert bench.endpoint.request_url("/v1/chat/completions") == "http://h:9/my-api/chat"
    assert built("--endpoint", "").endpoint.request_url("/v1/chat/completions") == "http://localhost:8000"
    assert built("--url", "h:9/v1", "--endpoint", "/v1/custom").endpoint.request_url("/x") == "http://h:9/v1/custom"
    for value in ("round-robin", "round_robin"):
        assert built("--url", "a:1", "b:2", "--url-strategy", value).endpoint.url_strategy == "round_robin"
    assert built("--transport", "http").endpoint == built("--transport-type", "http").endpoint == built().endpoint


@pytest.mark.parametrize(("argv", "request_url"), [
    (["--url", "http://h:8000"], "http://h:8000/v1/chat/completions"),
    (["--url", "http://h:8000/v1"], "http://h:8000/v1/chat/completions"),
    (["--url", "http://h:8000/v1/"], "http://h:8000/v1/chat/completions"),
    (["--url", "http://h:8000/v1/chat/completions"], "http://h:8000/v1/chat/completions"),
    (["--url", "h:8000"], "http://h:8000/v1/chat/completions"),
    (["--url", "h:8000/v1"], "http://h:8000/v1/chat/completions"),
    (["--url", "h:8000/v1", "--endpoint-type", "completions"], "http://h:8000/v1/completions"),
    (["--url", "h:8000/v1", "--endpoint", "/chat/completions"], "http://h:8000/v1/chat/completions"),
    (["--url", "h:8000", "--custom-endpoint", "/generate"], "http://h:8000/generate"),
])
def test_each_url_form_gives_the_request_url_and_root_metrics(argv: list[str], request_url: str) -> None:
    from aiperf.endpoints import catalog
    from aiperf.servermetrics.endpoints import endpoints_of

    bench = built(*argv)
    assert bench.endpoint.request_url(catalog.spec_of(bench.endpoint.type).path) == request_url
    assert endpoints_of(bench) == ["http://h:8000/metrics"]


def test_several_urls_each_with_its_root_metrics() -> None:
    from aiperf.servermetrics.endpoints import endpoints_of

    bench = built("--url", "a:1/v1", "http://b:2/v1/chat/completions", "--url-strategy", "round-robin")
    assert bench.endpoint.request_urls("/v1/chat/completions") == ["http://a:1/v1/chat/completions",
                                                                   "http://b:2/v1/chat/completions"]
    assert endpoints_of(bench) == ["http://a:1/metrics", "http://b:2/metrics"]


def test_multi_turn_and_prefix_aliases() -> None:
    aiperf = built("--session-turns-mean", "3", "--session-turns-stddev", "1", "--session-turn-delay-mean", "50",
                   "--session-turn-delay-stddev", "5", "--session-delay-ratio", "0.5",
                   "--prompt-prefix-pool-size", "4", "--prompt-prefix-length", "16",
                   "--synthetic-input-tokens-block-size", "64")
    ours = built("--conversation-turn-mean", "3", "--conversation-turn-stddev", "1",
                 "--conversation-turn-delay-mean", "50", "--conversation-turn-delay-stddev", "5",
                 "--conversation-turn-delay-ratio", "0.5", "--num-prefix-prompts", "4",
                 "--prefix-prompt-length", "16", "--isl-block-size", "64")
    assert aiperf == ours
    dataset: Any = ours.dataset
    assert (dataset.turns.mean, dataset.turns.stddev, dataset.turn_delay.mean, dataset.turn_delay_ratio) == \
        (3, 1, 50, 0.5)
    assert (dataset.prefix_prompts.pool_size, dataset.prefix_prompts.length, dataset.prompts.block_size) == (4, 16, 64)
    assert built("--vllm-burstiness", "2", "--request-rate", "4", "--arrival-pattern", "gamma").profiling == \
        built("--arrival-smoothness", "2", "--request-rate", "4", "--request-rate-mode", "gamma").profiling


def test_warmup_follows_the_profiling_load_unless_told() -> None:
    warm = built("--concurrency", "6", "--warmup-request-count", "5").warmup
    assert warm == ConcurrencyPhase(name="warmup", concurrency=6, requests=5)
    warm = built("--concurrency", "6", "--warmup-duration", "2", "--warmup-grace-period", "1",
                 "--warmup-concurrency", "2", "--concurrency-ramp-duration", "3").warmup
    assert warm == ConcurrencyPhase(name="warmup", concurrency=2, duration=2, grace_period=1,
                                    concurrency_ramp=Ramp(duration=3))
    warm = built("--request-rate", "10", "--warmup-request-count", "4", "--warmup-request-rate", "2",
                 "--warmup-arrival-pattern", "constant", "--warmup-request-rate-ramp-duration", "1").warmup
    assert warm == ConstantPhase(name="warmup", rate=2, requests=4, rate_ramp=Ramp(duration=1))
    warm = built("--request-rate", "10", "--request-rate-ramp-duration", "2", "--warmup-request-count", "4").warmup
    assert warm == PoissonPhase(name="warmup", rate=10, requests=4, rate_ramp=Ramp(duration=2))
    warm = built("--concurrency", "4", "--prefill-concurrency", "2", "--warmup-request-count", "3",
                 "--warmup-prefill-concurrency", "1", "--warmup-prefill-concurrency-ramp-duration", "1").warmup
    assert warm == ConcurrencyPhase(name="warmup", concurrency=4, requests=3, prefill_concurrency=1,
                                    prefill_ramp=Ramp(duration=1))
    assert built("--warmup-request-count", "0").warmup is None
    gamma = built("--request-rate", "3", "--arrival-pattern", "gamma", "--arrival-smoothness", "2",
                  "--warmup-duration", "1").warmup
    assert gamma == GammaPhase(name="warmup", rate=3, smoothness=2, duration=1)


def test_warmup_flags_override_a_config_files_warmup(tmp_path: Any) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("schemaVersion: '2.0'\nbenchmark:\n  model: m\n  phases:\n"
                    "    - {name: warmup, type: concurrency, concurrency: 2, requests: 3}\n"
                    "    - {name: profiling, type: concurrency, concurrency: 4, requests: 8}\n")
    _, bound, _ = build_app().parse_args(["profile", "--config", str(path), "--ui", "none", "--warmup-concurrency",
                                          "5", "--warmup-request-rate", "9"], exit_on_error=False)
    bench = build_benchmark(bound.arguments["flags"], bound.arguments["local"], config_file=str(path)).benchmark
    assert bench.warmup == PoissonPhase(name="warmup", rate=9, concurrency=5, requests=3)


def test_replay_exports_and_telemetry_flags(tmp_path: Any) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 5, "input_length": 10, "output_length": 2, "hash_ids": [1]}\n')
    fixed = built("--input-file", str(trace), "--custom-dataset-type", "mooncake_trace", "--fixed-schedule",
                  "--fixed-schedule-auto-offset").profiling
    assert fixed.auto_offset is True  # type: ignore[union-attr]
    window = built("--input-file", str(trace), "--custom-dataset-type", "mooncake_trace", "--fixed-schedule",
                   "--fixed-schedule-start-offset", "100", "--fixed-schedule-end-offset", "400").profiling
    # AIPerf: a start offset turns auto_offset off (the replay's zero is the start offset)
    assert (window.start_offset, window.end_offset, window.auto_offset) == (100, 400, False)  # type: ignore[union-attr]
    end_only = built("--input-file", str(trace), "--fixed-schedule", "--fixed-schedule-end-offset", "7").profiling
    assert (end_only.start_offset, end_only.end_offset, end_only.auto_offset) == (None, 7, True)  # type: ignore[union-attr]
    bench = built("--slice-duration", "2.5", "--profile-export-level", "summary",
                  "--server-metrics-formats", "csv", "--gpu-telemetry", "node1:9400", "http://n2:9401/metrics")
    assert bench.artifacts.slice_duration == 2.5 and bench.artifacts.export_level == "summary"
    assert bench.server_metrics.formats == ["csv"]
    assert bench.gpu_telemetry.enabled and bench.gpu_telemetry.urls == ["http://node1:9400", "http://n2:9401/metrics"]
    assert not built("--no-gpu-telemetry").gpu_telemetry.enabled
    assert built("--server-metrics-formats", "json", "csv", "json").server_metrics.formats == ["json", "csv"]
    for spelling in ("--profile-export-prefix", "--profile-export-file"):
        assert built(spelling, "run1.json").artifacts.prefix == "run1.json"
    assert built().artifacts.prefix is None


def test_wait_for_model_flags() -> None:
    endpoint = built("--wait-for-model-timeout", "30", "--wait-for-model-mode", "both",
                     "--wait-for-model-interval", "0.5").endpoint
    assert (endpoint.wait_for_model_timeout, endpoint.wait_for_model_mode, endpoint.wait_for_model_interval) == \
        (30.0, "both", 0.5)
    default = built().endpoint
    assert (default.wait_for_model_timeout, default.wait_for_model_mode, default.wait_for_model_interval) == \
        (0.0, "inference", 5.0)
    # AIPerf tolerates the defaults given without a timeout
    assert built("--wait-for-model-mode", "inference", "--wait-for-model-interval", "5").endpoint == default


@pytest.mark.parametrize(("argv", "error"), [
    (["--warmup-concurrency", "3"], "error: --warmup-concurrency: needs --warmup-request-count or --warmup-duration"),
    (["--warmup-request-count", "3", "--warmup-grace-period", "1"],
     "error: --warmup-grace-period 1: needs --warmup-duration"),
    (["--warmup-duration", "1", "--warmup-request-rate-ramp-duration", "2"],
     "error: --warmup-request-rate-ramp-duration 2: needs --warmup-request-rate or --request-rate"),
    (["--endpoint", "chat/completions"],
     "error: --custom-endpoint chat/completions: must start with / (e.g. /chat/completions), as in AIPerf\n"),
    (["--input-file", "x.jsonl", "--isl", "8"],
     "error: --isl: only for synthetic prompts; a file dataset brings its own (as in AIPerf)\n"),
    (["--fixed-schedule-auto-offset"], "error: --fixed-schedule-auto-offset: only with --fixed-schedule"),
    (["--fixed-schedule-end-offset", "5"], "error: --fixed-schedule-end-offset 5: only with --fixed-schedule"),
    (["--wait-for-model-mode", "models"],
     "error: --wait-for-model-mode: no effect unless --wait-for-model-timeout is positive"),
    (["--wait-for-model-interval", "1", "--wait-for-model-mode", "both"],
     "error: --wait-for-model-interval, --wait-for-model-mode: no effect unless --wait-for-model-timeout"),
    (["--wait-for-model-timeout", "-1"], "error: --wait-for-model-timeout -1: must be >= 0 (0: no wait)"),
    (["--wait-for-model-timeout", "5", "--wait-for-model-interval", "0"],
     "error: --wait-for-model-interval 0: must be > 0"),
    (["--profile-export-prefix", "a/b"], "error: --profile-export-prefix 'a/b': a file name base without / or spaces"),
    (["--input-file", "t.jsonl", "--fixed-schedule", "--fixed-schedule-start-offset", "-1"],
     "error: --fixed-schedule-start-offset -1: must be >= 0 (ms)"),
    (["--input-file", "t.jsonl", "--fixed-schedule", "--fixed-schedule-start-offset", "9",
      "--fixed-schedule-end-offset", "5"], "error: --fixed-schedule-start-offset 9: after --fixed-schedule-end-offset 5"),
    (["--input-file", "t.jsonl", "--fixed-schedule", "--fixed-schedule-auto-offset", "--fixed-schedule-start-offset",
      "9"], "error: --fixed-schedule-start-offset: not with --fixed-schedule-auto-offset"),
    (["--server-metrics-formats", "parquet"],
     "error: --server-metrics-formats parquet: not supported (only the json and csv server-metrics exports"),
    (["--server-metrics-formats", "xml"], "error: --server-metrics-formats xml: unknown format (json, csv)"),
    (["--gpu-telemetry", "pynvml"], "error: --gpu-telemetry pynvml: not supported (local GPU collectors"),
    (["--gpu-telemetry", "dashboard"], "error: --gpu-telemetry dashboard: not supported (the realtime GPU"),
    (["--gpu-telemetry", "m.csv"], "error: --gpu-telemetry m.csv: not supported (custom GPU metrics files"),
])
def test_bad_group_values_are_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], error: str) -> None:
    assert main(["profile", "-m", "m", "--url", "127.0.0.1:9", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(error) and err.count("\n") == 1, err


def test_demo_takes_the_profile_flags_over_its_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    from aiperf.cli.demo import DEMO_FLAGS, demo_flags

    _, bound, _ = build_app().parse_args(["demo", "--ui", "dashboard", "--concurrency", "2",
                                          "--benchmark-duration", "3", "--warmup-request-count", "1"],
                                         exit_on_error=False)
    flags, local = demo_flags(bound.arguments["flags"], bound.arguments["local"])
    assert (local.ui, local.artifact_dir) == ("dashboard", "artifacts/demo")
    assert (flags.concurrency, flags.benchmark_duration, flags.request_count, flags.warmup_request_count) == \
        (2, 3, None, 1)
    assert (flags.model, flags.streaming, flags.isl, flags.osl) == (DEMO_FLAGS.model, True, 128, 64)
    assert main(["demo", "--url", "h:1"]) == 2
    assert capsys.readouterr().err == ("error: --url: the demo benchmarks its own mock server "
                                       "(use aiperf profile for another)\n")
