"""The benchmark model: valid documents round-trip, invalid ones fail with a path, AIPerf's
config v2 shorthands are understood, and the JSON Schema is stable."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
from _documents import benchmark_documents
from hypothesis import given, settings

from aiperf.config import (
    Benchmark,
    CommsOptions,
    ConfigError,
    PoissonPhase,
    RunConfig,
    benchmark_schema,
    decode_benchmark,
    dump_run_config,
    load_run_config,
    normalize,
)
from aiperf.config.benchmark import GOODPUT_METRICS

GOLDEN = Path(__file__).parent / "golden" / "benchmark.schema.json"

@settings(max_examples=150, deadline=None)
@given(document=benchmark_documents())
def test_any_valid_model_round_trips_through_json_and_run_config(document: dict[str, Any], tmp_path_factory:
                                                                 pytest.TempPathFactory) -> None:
    benchmark = decode_benchmark(document)
    assert msgspec.json.decode(msgspec.json.encode(benchmark), type=Benchmark) == benchmark
    assert decode_benchmark(msgspec.to_builtins(benchmark)) == benchmark
    path = tmp_path_factory.mktemp("rc") / "run_config.json"
    config = RunConfig(run_id="r", comms=CommsOptions(ipc_dir="/tmp"), benchmark=benchmark)
    dump_run_config(config, path)
    assert load_run_config(path) == config


@pytest.mark.parametrize(("document", "where"), [
    ({"models": []}, "models: expected a list of length >= 1"),
    ({"models": ["m"], "endpoint": {"urls": ["ftp://x"]}}, "endpoint.urls[0]:"),
    ({"models": ["m"], "phases": [{"type": "concurrency", "requests": 1, "grace_period": 2}]},
     "phases[0].grace_period: needs duration"),
    ({"models": ["m"], "phases": [{"type": "concurrency", "name": "warmup", "requests": 1,
                                   "exclude_from_results": False}, {"type": "concurrency", "requests": 1}]},
     "phases[0].exclude_from_results: a warmup phase is always excluded from the results"),
    ({"models": ["m"], "datasets": [{"type": "synthetic", "prompts": {"isl": {"mean": 10, "median": 20}}}]},
     "datasets[0].prompts.isl.median: needs a mean at least as large"),
    ({"models": ["m"], "datasets": [{"type": "synthetic", "prompts": {"isl": {"peaks": [{"mean": 5}]}}}]},
     "datasets[0].prompts.isl.peaks: a mixture needs at least two peaks"),
    ({"models": ["m"], "datasets": [{"type": "file"}]}, "datasets[0].path: give a path or inline records"),
    ({"models": ["m"], "phases": [{"type": "concurrency", "name": "custom", "requests": 1}]},
     "phases[0].kind: required for the custom phase name"),
    ({"models": ["m"], "phases": [{"type": "fixed_schedule"}]}, "phases: fixed_schedule needs a file dataset"),
    ({"models": ["m"], "phases": [{"type": "concurrency", "name": "warmup", "requests": 1}]},
     "phases: an optional warmup phase, then one profiling phase"),
    ({"models": ["m"], "slos": {"ttft": 1}}, "slos (a key): unknown value 'ttft'"),
    ({"models": ["m"], "tokenizer": {"name": ""}}, "tokenizer.name:"),
    ({"models": ["m"], "runtime": {"workers": 0}}, "runtime.workers: expected an integer >= 1"),
    ({"models": ["m"], "artifacts": {"export_level": "full"}}, "artifacts.export_level: unknown value 'full'"),
    ({"models": ["m"], "runtime": {"aggregation": "sharded"}, "artifacts": {"slice_duration": 1}},
     "runtime.aggregation: sharded keeps no per-request times for timeslices"),
])
def test_invalid_documents_name_the_field(document: dict[str, Any], where: str) -> None:
    with pytest.raises(ConfigError) as info:
        decode_benchmark(document, source="f.yaml")
    assert str(info.value).startswith("f.yaml: ") and where in str(info.value), str(info.value)


def test_aiperf_shorthands_and_camel_case_are_understood() -> None:
    document, secrets = normalize({
        "schemaVersion": "2.0", "randomSeed": 3,
        "benchmark": {
            "model": "m",
            "endpoint": {"url": "http://h:1", "apiKey": "k", "headers": {"X-A": "v"},
                         "useServerTokenCount": True, "extra": {"maxTokens": 5}},
            "dataset": {"entries": 9, "isl": 64, "osl": {"mean": 8, "stddev": 1}},
            "warmup": {"type": "concurrency", "requests": 2},
            "profiling": {"type": "poisson", "rate": 5, "duration": "1m", "gracePeriod": "5s"},
            "tokenizer": "/tok.json",
        }})
    b = decode_benchmark(document)
    assert (b.model, b.endpoint.url, b.endpoint.use_server_token_count, b.random_seed) == ("m", "http://h:1", True, 3)
    assert b.endpoint.extra == {"maxTokens": 5}  # request body keys are data: never renamed
    assert (b.dataset.entries, b.dataset.prompts.isl.mean, b.dataset.prompts.osl) == (
        9, 64, msgspec.convert({"mean": 8, "stddev": 1}, type(b.dataset.prompts.osl)))
    assert [p.name for p in b.phases] == ["warmup", "profiling"]
    assert b.profiling == PoissonPhase(rate=5, duration=60.0, grace_period=5.0)
    assert b.tokenizer.name == "/tok.json" and b.endpoint.header_names == ["X-A"]
    assert (secrets.api_key, secrets.headers) == ("k", {"X-A": "v"})
    assert "k" not in json.dumps(document) or "apiKey" not in json.dumps(document)


def test_the_json_schema_is_stable() -> None:
    text = json.dumps(benchmark_schema(), indent=2, sort_keys=True) + "\n"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text)
    assert GOLDEN.exists(), f"missing {GOLDEN}: run with UPDATE_GOLDEN=1"
    assert text == GOLDEN.read_text(), "the model changed: review, then regenerate with UPDATE_GOLDEN=1"


def test_the_schema_carries_the_constraints() -> None:
    defs = benchmark_schema()["$defs"]
    assert defs["Benchmark"]["additionalProperties"] is False
    assert defs["Length"]["properties"]["mean"]["anyOf"][0]["minimum"] == 0
    assert "6553[0-5]" in defs["Endpoint"]["properties"]["urls"]["items"]["pattern"]  # ports up to 65535
    assert sorted(defs["Benchmark"]["properties"]["slos"]["propertyNames"]["enum"]) == sorted(GOODPUT_METRICS)


def test_aggregation_defaults_to_records_and_takes_sharded() -> None:
    assert decode_benchmark({"models": ["m"]}).runtime.aggregation == "records"
    document, _ = normalize({"schemaVersion": "2.0", "benchmark": {"model": "m", "runtime": {"aggregation": "sharded"}}})
    assert decode_benchmark(document).runtime.aggregation == "sharded"


def test_export_level_defaults_to_records_and_takes_raw() -> None:
    assert decode_benchmark({"models": ["m"]}).artifacts.export_level == "records"
    document, _ = normalize({"schemaVersion": "2.0", "benchmark": {"model": "m", "artifacts": {"exportLevel": "raw"}}})
    assert decode_benchmark(document).artifacts.export_level == "raw"
