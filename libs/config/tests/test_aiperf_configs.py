"""AIPerf 0.13's config v2 files as users write them: `${VAR}` and Jinja2 `variables`, camelCase and
snake_case, every shorthand and distribution shape, the sweep types; features we do not build
are refused by name (or dropped when they ask for nothing); and a benchmark written the way
AIPerf writes one reads back as itself."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import msgspec
import pytest
from _documents import benchmark_documents
from hypothesis import given, settings
from hypothesis import strategies as st

from aiperf.config import ConfigError, ModelSelection, UserCentricPhase, decode_benchmark, normalize
from aiperf.config.aiperf_form import to_aiperf_body
from aiperf.config.compat import UNBUILT
from aiperf.config.loader import read_document, snake
from aiperf.config.sweep import apply_values, split_sweep_blocks, sweep_variations
from aiperf.config.templating import render_document

Doc = dict[str, Any]


def read(body: Doc, **envelope: Any) -> Any:
    document, _ = normalize({"schemaVersion": "2.0", "benchmark": body, **envelope})
    return decode_benchmark(document)


# -- ${VAR} and Jinja2 ---------------------------------------------------------------------------

def test_environment_references_take_the_value_else_the_default_and_whole_values_become_numbers() -> None:
    doc = {"benchmark": {"model": "${MODEL:m}", "endpoint": {"url": "http://${HOST}:8000/v1"}},
           "multiRun": {"numRuns": "${RUNS:3}", "flag": "${ON:true}", "empty": "${NONE:}"}}
    out = render_document(doc, {"HOST": "vllm"})
    assert out["benchmark"] == {"model": "m", "endpoint": {"url": "http://vllm:8000/v1"}}
    assert out["multiRun"] == {"numRuns": 3, "flag": True, "empty": ""}


@pytest.mark.parametrize(("value", "message"), [
    ("${UNSET_NAME}", "${UNSET_NAME}: the environment variable is not set (give a default: ${UNSET_NAME:value})"),
    ("x-${OPEN", "'${' without its closing '}'"),
])
def test_a_bad_environment_reference_names_the_field(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("$", r"\$").replace("{", r"\{").replace("(", r"\(")
                       .replace(")", r"\)")) as info:
        render_document({"benchmark": {"model": value}}, {})
    assert str(info.value).startswith("benchmark.model: ")


def test_variables_resolve_in_dependency_order_and_reach_the_benchmark() -> None:
    doc = {"variables": {"total": "{{ per_gpu * gpus }}", "per_gpu": 32, "gpus": 4, "label": "{{ phases.profiling.rate }}"},
           "benchmark": {"model": "m", "phases": [{"name": "profiling", "type": "poisson", "rate": 5,
                                                   "concurrency": "{{ total // 2 }}", "requests": "{{ total * 10 }}"}],
                         "artifacts": {"user_files": [{"path": "r.md", "content": "{{ epoch }}"}]}}}
    out = render_document(doc, {})
    assert out["variables"] == {"total": 128, "per_gpu": 32, "gpus": 4, "label": 5}
    phase = out["benchmark"]["phases"][0]
    assert (phase["concurrency"], phase["requests"]) == (64, 1280)
    assert out["benchmark"]["artifacts"]["user_files"][0]["content"] == "{{ epoch }}"  # rendered when the run starts


@pytest.mark.parametrize(("doc", "message"), [
    ({"variables": {"a": "{{ b }}", "b": "{{ a }}"}, "benchmark": {"model": "{{ a }}"}}, "a, b refer to each other"),
    ({"benchmark": {"model": "{{ nope }}"}}, "benchmark.model: '{{ nope }}': 'nope' is undefined"),
    ({"benchmark": {"model": "{{ 1 +"}}, "benchmark.model: '{{ 1 +': an unbalanced"),
    ({"benchmark": {"model": "{{ ''.__class__.__mro__ }}"}}, "benchmark.model:"),
])
def test_a_template_that_does_not_render_is_one_line(doc: Doc, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        render_document(doc, {})
    assert message in str(info.value) and "\n" not in str(info.value)


def test_read_document_renders_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("variables: {c: 4}\nbenchmark:\n  model: ${M:mm}\n  phases: {type: concurrency, "
                    "concurrency: '{{ c }}', requests: '{{ c * 2 }}'}\n")
    b = read(read_document(path, {})["benchmark"])
    assert (b.model, b.profiling.concurrency, b.profiling.requests) == ("mm", 4, 8)


# -- shapes --------------------------------------------------------------------------------------

@pytest.mark.parametrize("models", ["m", ["m"], {"items": [{"name": "m"}]},
                                    {"strategy": "weighted", "items": [{"name": "m", "weight": 1}]}])
def test_every_spelling_of_one_model_is_that_model(models: Any) -> None:
    assert read({"models": models}).models == ["m"]


def test_several_models_keep_their_order_strategy_and_weights() -> None:
    assert read({"models": ["a", "b"]}).model_selection == ModelSelection()
    b = read({"models": {"strategy": "RANDOM", "items": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}})
    assert (b.models, b.model_selection) == (["a", "b", "c"], ModelSelection(strategy="random"))
    b = read({"models": {"strategy": "weighted", "items": [{"name": "a", "weight": 0.25}, {"name": "b", "weight": 0.75}]}})
    assert b.model_selection == ModelSelection(strategy="weighted", weights=[0.25, 0.75])
    # weights on some models only do nothing unless the strategy is weighted (AIPerf's rule)
    assert read({"models": {"items": [{"name": "a", "weight": 0.5}, {"name": "b"}]}}).model_selection == ModelSelection()


@pytest.mark.parametrize(("models", "message"), [
    ({"strategy": "weighted", "items": [{"name": "a", "weight": 0.5}, {"name": "b"}]},
     "models.items[1].weight: the weighted strategy needs a weight for every model"),
    ({"strategy": "weighted", "items": [{"name": "a", "weight": 0.5}, {"name": "b", "weight": 0.2}]},
     "must sum to 1.0, got 0.7"),
    ({"strategy": "weighted", "items": [{"name": "a", "weight": 1.5}]}, "expected a number <= 1.0"),
    ({"strategy": "fastest", "items": [{"name": "a"}]}, "models.strategy: unknown value 'fastest'"),
])
def test_bad_model_selections_fail_with_one_line(models: Any, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        read({"models": models})
    assert message in str(info.value) and "\n" not in str(info.value)


def test_aiperfs_shorthands_read_as_the_long_form() -> None:
    short = read({"model": "m", "endpoint": {"url": "h:8000/v1/chat/completions", "timeout": "2m"},
                  "dataset": {"entries": 7, "isl": 128, "osl": {"mean": 64, "median": 50}},
                  "warmup": {"type": "concurrency", "requests": 4, "excludeFromResults": True},
                  "profiling": {"type": "gamma", "rate": 5, "smoothness": 2, "requests": 50, "duration": "90s",
                                "gracePeriod": "5s"},
                  "serverMetrics": "http://h:9000", "artifacts": {"records": False}, "logging": {"level": "TRACE"}})
    long = read({"models": ["m"], "endpoint": {"urls": ["http://h:8000/v1/chat/completions"], "timeout": 120},
                 "datasets": [{"name": "default", "type": "synthetic", "entries": 7,
                               "prompts": {"isl": {"mean": 128}, "osl": {"mean": 64, "median": 50}}}],
                 "phases": [{"name": "warmup", "type": "concurrency", "requests": 4, "exclude_from_results": True},
                            {"name": "profiling", "type": "gamma", "rate": 5, "smoothness": 2, "requests": 50,
                             "duration": 90, "grace_period": 5}],
                 "server_metrics": {"urls": ["http://h:9000"]}, "artifacts": {"export_level": "summary"},
                 "logging": {"level": "debug"}})
    assert short == long
    assert short.profiling.requests == 50 and short.profiling.duration == 90  # whichever comes first


def test_several_urls_are_read_in_order_each_joined_with_the_path() -> None:
    document, _ = normalize({"benchmark": {"model": "m", "endpoint": {
        "urls": ["server1:8000/v1", "http://server2:8000", "http://server3:8000/v1/chat/completions"],
        "urlStrategy": "round_robin"}}})
    endpoint = decode_benchmark(document).endpoint
    assert endpoint.request_urls("/v1/chat/completions") == [
        "http://server1:8000/v1/chat/completions", "http://server2:8000/v1/chat/completions",
        "http://server3:8000/v1/chat/completions"]
    assert [endpoint.metrics_url(i) for i in range(3)] == [
        "http://server1:8000/metrics", "http://server2:8000/metrics", "http://server3:8000/metrics"]


@pytest.mark.parametrize(("url", "path", "expected"), [
    ("http://h:8000", None, "http://h:8000/v1/chat/completions"),
    ("http://h:8000/", None, "http://h:8000/v1/chat/completions"),
    ("http://h:8000/v1", None, "http://h:8000/v1/chat/completions"),
    ("http://h:8000/v1/chat/completions", None, "http://h:8000/v1/chat/completions"),
    ("http://h:8000", "/custom/generate", "http://h:8000/custom/generate"),
    ("http://h:8000/api", "", "http://h:8000/api"),
    ("h:8000", None, "http://h:8000/v1/chat/completions"),  # no scheme: http:// added
    ("h:8000/v1", None, "http://h:8000/v1/chat/completions"),
    ("h:8000/v1/chat/completions", None, "http://h:8000/v1/chat/completions"),
    ("http://h:8000/v1", "/v1/custom", "http://h:8000/v1/custom"),
])
def test_the_request_url_joins_the_url_and_the_path_as_aiperf_does(url: str, path: str | None, expected: str) -> None:
    endpoint = read({"models": ["m"], "endpoint": {"url": url, **({} if path is None else {"path": path})}}).endpoint
    assert endpoint.request_url("/v1/chat/completions") == expected
    assert endpoint.metrics_url() == "http://h:8000/metrics"


@pytest.mark.parametrize(("isl", "expected"), [
    (512, {"mean": 512}),
    ({"value": 512}, {"mean": 512}),
    ({"type": "normal", "mean": 512, "stddev": 30}, {"mean": 512, "stddev": 30}),
    ({"mean": 512, "median": 400, "min": 10, "max": 4000}, {"mean": 512, "median": 400, "min": 10, "max": 4000}),
    ({"peaks": [{"mean": 128, "stddev": 20, "weight": 60}, {"distribution": {"mean": 2048, "median": 1800},
                                                             "weight": 40}]},
     {"peaks": [{"mean": 128, "stddev": 20, "weight": 60}, {"mean": 2048, "median": 1800, "weight": 40}]}),
    ({"points": [{"value": 128, "weight": 3}, {"value": 512}]}, {"points": [{"value": 128, "weight": 3},
                                                                            {"value": 512}]}),
])
def test_every_distribution_shape_is_read(isl: Any, expected: Doc) -> None:
    got = read({"models": ["m"], "dataset": {"isl": isl}}).dataset.prompts.isl
    assert msgspec.convert(expected, type(got)) == got


def test_a_sequence_distribution_takes_pairs_with_probabilities() -> None:
    got = read({"models": ["m"], "dataset": {"prompts": {"sequenceDistribution": [
        {"isl": 2048, "osl": 256, "probability": 30}, {"isl": 8192, "islStddev": 100, "osl": 512, "probability": 70}]}}})
    pairs = got.dataset.prompts.sequence_distribution
    assert [(p.isl.mean, p.isl.stddev, p.osl.mean, p.probability) for p in pairs] == [(2048, 0, 256, 30),
                                                                                    (8192, 100, 512, 70)]


@pytest.mark.parametrize(("block", "urls"), [
    (None, []), ("node:9400", ["node:9400"]), ({"url": "http://n:9401/metrics"}, ["http://n:9401/metrics"]),
    ({"urls": ["a:9400", "b:9400"], "enabled": True}, ["a:9400", "b:9400"])])
def test_gpu_telemetry_is_on_by_default_and_takes_aiperfs_url_forms(block: Any, urls: list[str]) -> None:
    got = read({"model": "m", **({"gpuTelemetry": block} if block is not None else {})})
    assert (got.gpu_telemetry.enabled, got.gpu_telemetry.urls) == (True, urls)
    assert read({"model": "m", "gpu_telemetry": {"enabled": False}}).gpu_telemetry.enabled is False


def test_a_slice_duration_takes_aiperfs_duration_forms() -> None:
    assert read({"model": "m", "artifacts": {"sliceDuration": "500ms"}}).artifacts.slice_duration == 0.5
    assert read({"model": "m", "artifacts": {"slice_duration": 10}}).artifacts.slice_duration == 10


# -- what we do not build ------------------------------------------------------------------------

@pytest.mark.parametrize("body", [
    {"otel": {}, "mlflow": {"experiment": "aiperf"}, "wandb": {}, "networkLatency": {"enabled": False},
     "gpuTelemetry": {"enabled": True, "collector": "dcgm", "mode": "summary"}, "metrics": {},
     "unsafeOverride": False},
    {"endpoint": {"transport": "http", "waitForModelInterval": 5.0, "requestContentType": "application/json"},
     "tokenizer": {"revision": "main", "trustRemoteCode": False}, "runtime": {"serviceRunType": "multiprocessing"},
     "phases": [{"name": "profiling", "type": "concurrency", "requests": 5, "seamless": False,
                 "adaptiveScaleBaseStep": 10, "trajectoryStartMinRatio": 0.25}],
     "dataset": {"prompts": {"batchSize": 1, "cacheBust": {"target": "none"}}, "images": {"batchSize": 0}}},
])
def test_unbuilt_features_that_ask_for_nothing_are_dropped(body: Doc) -> None:
    assert read({"model": "m", **body}).model == "m"


@pytest.mark.parametrize(("body", "message"), [
    ({"gpuTelemetry": {"mode": "realtime_dashboard"}},
     "gpu_telemetry.mode: not supported (the realtime GPU telemetry dashboard is not built)"),
    ({"gpuTelemetry": {"collector": "pynvml"}}, "gpu_telemetry.collector: not supported (local GPU collectors"),
    ({"gpuTelemetry": {"metricsFile": "gpu.csv"}}, "gpu_telemetry.metrics_file: not supported (replaying"),
    ({"otel": {"metricsUrl": "http://otel:4318"}}, "otel: not supported (OpenTelemetry export is not built)"),
    ({"dataset": {"video": {"batchSize": 1}}}, "datasets[0].video: not supported (synthetic video"),
    ({"dataset": {"images": {"batchSize": 1, "source": "/imgs"}}},
     "datasets[0].images.source: '/imgs': not supported (synthetic images are random noise"),
    ({"dataset": {"audio": {"batchSize": 1, "format": "mp3"}}},
     "datasets[0].audio.format: 'mp3': not supported (synthetic audio is WAV)"),
    ({"phases": [{"name": "profiling", "type": "concurrency", "requests": 5, "seamless": True}]},
     "phases[0].seamless: not supported (seamless phase transitions"),
    ({"phases": {"type": "agentic_replay", "duration": 5}},
     "phases.type: 'agentic_replay': not supported (the phase types are concurrency"),
    ({"endpoint": {"type": "responses"}}, "endpoint.type: 'responses': not supported (the endpoint types are chat"),
    ({"dataset": {"type": "public", "dataset": "sharegpt"}}, "datasets[0].type: public: not supported"),
    ({"dataset": {"type": "file", "path": "x", "format": "speed_bench_coding"}},
     "datasets[0].format: 'speed_bench_coding': not supported (the file formats are single_turn"),
    ({"serverMetrics": {"formats": ["json", "parquet"]}}, "server_metrics.formats: parquet: not supported"),
    ({"artifacts": {"summary": False}}, "artifacts.summary: false: not supported (the JSON summary is always"),
    ({"profiling": {"type": "concurrency", "duration": 60, "gracePeriod": "inf"}},
     "profiling.grace_period: inf: not supported (give a finite number of seconds)"),
])
def test_an_unbuilt_feature_is_refused_with_one_line_naming_it(body: Doc, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        read({"model": "m", **body})
    assert str(info.value).startswith(message), str(info.value)


def test_user_centric_phases_sessions_batches_and_connection_reuse_are_read() -> None:
    benchmark = read({"model": "m", "endpoint": {"connectionReuse": "sticky-user-sessions"},
                      "dataset": {"prompts": {"isl": 20, "batchSize": 4}},
                      "warmup": {"type": "concurrency", "sessions": 3, "concurrency": 2},
                      "profiling": {"type": "user_centric", "users": 3, "rate": 1.5, "duration": 5}})
    assert benchmark.endpoint.connection_reuse == "sticky-user-sessions"
    assert benchmark.dataset.prompts.batch_size == 4
    assert benchmark.warmup is not None and benchmark.warmup.sessions == 3
    assert isinstance(benchmark.profiling, UserCentricPhase)
    assert (benchmark.profiling.users, benchmark.profiling.rate) == (3, 1.5)
    with pytest.raises(ConfigError, match=r"^phases\[0\]\.rate_ramp: not for a user_centric phase"):
        read({"model": "m", "profiling": {"type": "user_centric", "users": 3, "rate": 1, "duration": 5,
                                          "rateRamp": 10}})
    with pytest.raises(ConfigError, match=r"prompts: batch_size is for synthetic prompts"):
        read({"model": "m", "dataset": {"type": "file", "path": "x.jsonl", "prompts": {"batchSize": 2}}})


def test_a_typo_is_an_unknown_field_not_an_unbuilt_feature() -> None:
    with pytest.raises(ConfigError, match=r"^endpoint: unknown field 'streeming'$"):
        read({"model": "m", "endpoint": {"streeming": True}})


def test_every_unbuilt_feature_is_listed_in_docs_compat() -> None:
    text = (Path(__file__).resolve().parents[3] / "docs" / "compat.md").read_text()
    missing = [path for path in UNBUILT if f"`{path}`" not in text]
    assert missing == [], f"docs/compat.md does not list {missing}"


# -- sweeps --------------------------------------------------------------------------------------

def _variations(doc: Doc) -> list[tuple[str, Any]]:
    rest, sweep, _ = split_sweep_blocks(doc, source="f.yaml")
    base, _ = normalize(rest)
    assert sweep is not None
    return [(v.label, decode_benchmark(apply_values(base, v.values, v.overlay))) for v in sweep_variations(sweep)]


BASE: Doc = {"model": "m", "dataset": {"type": "synthetic", "prompts": {"isl": 512, "osl": {"mean": 128, "stddev": 25}}},
             "phases": [{"name": "warmup", "type": "concurrency", "requests": 5, "concurrency": 2},
                        {"name": "profiling", "type": "poisson", "rate": 20, "duration": 60, "concurrency": 64}]}


def test_a_swept_dataset_path_and_a_bare_number_work_with_the_dataset_shorthand() -> None:
    got = _variations({"benchmark": copy.deepcopy(BASE), "sweep": {"parameters": {
        "datasets.default.prompts.isl": [128, 2048], "rate": [10.0, 30.0]}}})
    assert [(label, b.dataset.prompts.isl.mean, b.profiling.rate) for label, b in got] == [
        ("isl_128__rate_10.0", 128, 10.0), ("isl_128__rate_30.0", 128, 30.0),
        ("isl_2048__rate_10.0", 2048, 10.0), ("isl_2048__rate_30.0", 2048, 30.0)]


def test_a_scenarios_sweep_merges_phases_by_name_and_replaces_a_distribution_whole() -> None:
    got = _variations({"benchmark": copy.deepcopy(BASE), "sweep": {"type": "scenarios", "runs": [
        {"name": "chat", "benchmark": {"phases": [{"name": "profiling", "rate": 50.0, "concurrency": 128}]}},
        {"name": "rag", "benchmark": {"dataset": {"prompts": {"osl": {"mean": 256, "median": 200}}}}}]}})
    (chat_label, chat), (rag_label, rag) = got
    assert (chat_label, chat.profiling.rate, chat.profiling.concurrency, chat.profiling.duration) == (
        "chat", 50.0, 128, 60)
    assert chat.warmup is not None and chat.warmup.concurrency == 2
    osl = rag.dataset.prompts.osl
    assert rag_label == "rag" and osl is not None and (osl.mean, osl.median, osl.stddev) == (256, 200, 0)


def test_a_list_of_numbers_in_a_phase_is_a_grid_sweep_of_it() -> None:
    body = copy.deepcopy(BASE)
    body["phases"][1]["concurrency"] = [8, 16]
    got = _variations({"benchmark": body})
    assert [(label, b.profiling.concurrency) for label, b in got] == [("concurrency_8", 8), ("concurrency_16", 16)]


def test_a_swept_string_value_is_swept() -> None:
    body = {**copy.deepcopy(BASE), "endpoint": {"url": "http://h:1"}}
    got = _variations({"benchmark": body, "sweep": {"parameters": {"endpoint.type": ["chat", "completions"]}}})
    assert [(label, str(b.endpoint.type)) for label, b in got] == [("type_chat", "chat"),
                                                                   ("type_completions", "completions")]


@pytest.mark.parametrize(("sweep", "message"), [
    ({"type": "adaptive_search"}, "sweep.type: adaptive_search: not supported"),
    ({"parameters": {"variables.c": [1, 2]}}, "sweep.parameters.variables.c: not supported"),
    ({"parameters": {"concurrency": [1], "phases.profiling.concurrency": [2]}},
     "sweep.parameters.phases.profiling.concurrency: the same field as phases.profiling.concurrency"),
    ({"parameters": {"rate": [1]}, "slaFilters": [{"metricTag": "x"}]}, "sweep.sla_filters: not supported"),
])
def test_a_sweep_we_cannot_run_is_refused_by_name(sweep: Doc, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        split_sweep_blocks({"benchmark": copy.deepcopy(BASE), "sweep": sweep}, source="f.yaml")
    assert str(info.value).startswith(f"f.yaml: {message}"), str(info.value)


# -- properties ----------------------------------------------------------------------------------

def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(p.title() for p in rest)


_FREE = frozenset({"extra", "slos", "headers"})


def _respell(value: Any, flips: list[bool]) -> Any:
    """`value` with some keys (chosen by `flips`, cycled) in camelCase; free-form maps kept."""
    if isinstance(value, list):
        return [_respell(v, flips) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for i, (key, item) in enumerate(value.items()):
        name = _camel(key) if flips and flips[i % len(flips)] else key
        out[name] = item if key in _FREE else _respell(item, flips[1:] + flips[:1])
    return out


@settings(max_examples=80, deadline=None)
@given(document=benchmark_documents(), flips=st.lists(st.booleans(), min_size=1, max_size=5))
def test_camel_case_and_snake_case_spellings_read_the_same(document: Doc, flips: list[bool]) -> None:
    snake_doc, _ = normalize({"benchmark": document})
    mixed, _ = normalize({"benchmark": _respell(document, flips)})
    assert decode_benchmark(mixed) == decode_benchmark(snake_doc)
    assert all(snake(_camel(k)) == k for k in ("grace_period", "record_processors_per_pod", "isl"))


@settings(max_examples=80, deadline=None)
@given(document=benchmark_documents())
def test_a_benchmark_written_as_aiperf_writes_it_reads_back_as_itself(document: Doc) -> None:
    benchmark = decode_benchmark(document)
    body, seed = to_aiperf_body(benchmark)
    again, _ = normalize({"schemaVersion": "2.0", "benchmark": body, "randomSeed": seed})
    # the header names are not written: their values travel in a Secret, which names them
    endpoint = msgspec.structs.replace(benchmark.endpoint, header_names=[])
    assert decode_benchmark(again) == msgspec.structs.replace(benchmark, endpoint=endpoint)
