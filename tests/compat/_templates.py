"""What `tests/compat` expects of AIPerf 0.13.0's 27 config templates (read from its wheel): which
we refuse and with which line, and AIPerf's own reading of each (`aiperf_reading`), the reference
both `test_templates` (config files) and `test_kube_manifests` (the same templates as AIPerfJobs)
compare ours with."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from _oracle import Oracle, expand

TEMPLATES = (
    "audio_multimodal", "embeddings", "env_var_production", "fixed_schedule", "goodput_slo", "gpu_telemetry",
    "http_trace_metrics", "inline_dataset", "jinja2_variables", "kv_cache_test", "latency_test", "long_context",
    "minimal", "multi_turn_conversation", "multi_url_load_balancing", "multimodal_vision", "public_dataset",
    "ramping", "request_cancellation", "scenario_workload_profiles", "speed_bench_sweep", "sweep_distributions",
    "sweep_with_plot", "time_based_soak", "trace_replay", "user_files", "warmup_profiling",
)
"""The 27 templates of AIPerf 0.13.0."""

REFUSED = {
    "public_dataset": "datasets[0].type: public: not supported (public datasets (sharegpt, ...) are not built",
    "speed_bench_sweep": "datasets[0].format: 'speed_bench_coding': not supported",
    "sweep_with_plot": "plot: a plot block: not supported (`aiperf plot` draws its fixed set of plots",
    "trace_replay": "server_metrics.formats: parquet: not supported (server metrics are written as json and csv)",
}
"""Templates that use a feature we do not build yet, with the line `config validate` prints."""

AIPERF_CANNOT_EXPAND: dict[str, Callable[[dict[str, Any]], None]] = {
    # AIPerf 0.13.0's own `config expand` fails on this template: its sweep path
    # `datasets.default.prompts.isl` does not find the dataset written with the `dataset:`
    # shorthand. Its reading of the same file with the dataset written out is the reference.
    "sweep_distributions": lambda doc: doc["benchmark"].update(
        datasets=[{"name": "default", **doc["benchmark"].pop("dataset")}]),
}


def aiperf_reading(oracle: Oracle, name: str, cwd: Path) -> list[dict[str, Any]]:
    """AIPerf's `config expand --full` of template `name` (every variation's `dir_name` and
    benchmark); for a template in `AIPERF_CANNOT_EXPAND`, checks that AIPerf fails on it and reads
    the equivalent file instead."""
    path = oracle.templates / f"{name}.yaml"
    if name not in AIPERF_CANNOT_EXPAND:
        return expand(oracle, path, cwd)
    assert oracle.run("config", "expand", str(path), "--format", "json", "--full", cwd=cwd).returncode != 0
    doc = yaml.safe_load(path.read_text())
    AIPERF_CANNOT_EXPAND[name](doc)
    reference = cwd / path.name
    reference.write_text(yaml.safe_dump(doc, sort_keys=False))
    return expand(oracle, reference, cwd)


def clean_environment(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every `${VAR}` the file reads unset, as for the oracle (its defaults apply)."""
    for name in set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", path.read_text())):
        monkeypatch.delenv(name, raising=False)
