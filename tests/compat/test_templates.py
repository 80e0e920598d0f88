"""Every config template AIPerf 0.13.0 ships (`aiperf/config/templates/*.yaml` in its wheel, read
from the oracle venv) passes our `aiperf config validate`, and our `aiperf config expand`
resolves it to the same runs AIPerf's own loader does (`aiperf config expand --full`): the same
variations, phases, counts, rates, concurrency, ISL/OSL distributions, datasets, endpoint, SLOs
and exports, compared value by value. A template that uses a feature we do not build is refused
with one line naming it; each such template is listed below with that line (docs/compat.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from _oracle import Oracle, comparable, expand, find_oracle

from aiperf.cli.main import main

TEMPLATES = (
    "audio_multimodal", "embeddings", "env_var_production", "fixed_schedule", "goodput_slo", "gpu_telemetry",
    "http_trace_metrics", "inline_dataset", "jinja2_variables", "kv_cache_test", "latency_test", "long_context",
    "minimal", "multi_turn_conversation", "multi_url_load_balancing", "multimodal_vision", "public_dataset",
    "ramping", "request_cancellation", "scenario_workload_profiles", "speed_bench_sweep", "sweep_distributions",
    "sweep_with_plot", "time_based_soak", "trace_replay", "user_files", "warmup_profiling",
)
"""The 27 templates of AIPerf 0.13.0."""

REFUSED = {
    "audio_multimodal": "datasets[0].audio: not supported (synthetic audio is not built)",
    "embeddings": "datasets[0].prompts.batch_size: not supported (several inputs per request are not built)",
    "http_trace_metrics": "artifacts.show_trace_timing: not supported (the HTTP trace timing table is not built)",
    "kv_cache_test": "phases[0].type: 'user_centric': not supported (user-centric rate phases are not built yet)",
    "multi_turn_conversation": "endpoint.connection_reuse: 'sticky-user-sessions': not supported",
    "multi_url_load_balancing": "endpoint.urls: 4 URLs: not supported (one URL per benchmark yet)",
    "multimodal_vision": "datasets[0].images: not supported (synthetic images are not built)",
    "public_dataset": "datasets[0].type: public: not supported (public datasets (sharegpt, ...) are not built",
    "speed_bench_sweep": "datasets[0].format: 'speed_bench_coding': not supported",
    "sweep_with_plot": "plot: a plot block: not supported (`aiperf plot` draws its fixed set of plots",
    "trace_replay": "server_metrics.formats: parquet: not supported (server metrics are written as json and csv)",
}
"""Templates that use a feature we do not build yet, with the line `config validate` prints."""

AIPERF_CANNOT_EXPAND = {
    # AIPerf 0.13.0's own `config expand` fails on this template: its sweep path
    # `datasets.default.prompts.isl` does not find the dataset written with the `dataset:`
    # shorthand. Its reading of the same file with the dataset written out is the reference.
    "sweep_distributions": lambda doc: doc["benchmark"].update(
        datasets=[{"name": "default", **doc["benchmark"].pop("dataset")}]),
}


@pytest.fixture(scope="module")
def oracle() -> Oracle:
    return find_oracle()


def _ours(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def _clean_environment(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every `${VAR}` the template reads unset, as for the oracle (its defaults apply)."""
    for name in set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", path.read_text())):
        monkeypatch.delenv(name, raising=False)


def test_the_oracle_ships_the_templates_listed_here(oracle: Oracle) -> None:
    assert sorted(p.stem for p in oracle.templates.glob("*.yaml")) == sorted(TEMPLATES)
    assert set(REFUSED) <= set(TEMPLATES) and set(AIPERF_CANNOT_EXPAND) <= set(TEMPLATES)


@pytest.mark.parametrize("name", TEMPLATES)
def test_a_template_is_read_as_aiperf_reads_it(name: str, oracle: Oracle, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = oracle.templates / f"{name}.yaml"
    _clean_environment(path, monkeypatch)
    code, out, err = _ours(["config", "validate", str(path)], capsys)
    if name in REFUSED:
        assert code == 2 and out == "", (out, err)
        assert err.count("\n") == 1 and err.startswith(f"error: {path}: {REFUSED[name]}"), err
        return
    assert (code, err) == (0, ""), err
    assert out == f"{path}: ok\n"
    code, out, err = _ours(["config", "expand", str(path), "-o", "json"], capsys)
    assert code == 0, err
    ours = json.loads(out)["variations"]
    reference_file = path
    if name in AIPERF_CANNOT_EXPAND:
        assert oracle.run("config", "expand", str(path), "--format", "json", "--full", cwd=tmp_path).returncode != 0
        doc = yaml.safe_load(path.read_text())
        AIPERF_CANNOT_EXPAND[name](doc)
        reference_file = tmp_path / path.name
        reference_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    theirs = expand(oracle, reference_file, tmp_path)
    assert len(ours) == len(theirs)
    for mine, their in zip(ours, theirs, strict=True):
        label = their["dir_name"] if their["dir_name"] != "base" else "benchmark"
        assert mine["label"] == label
        assert comparable(mine["benchmark"]) == comparable(their["benchmark"]), label


def test_the_accepted_templates_are_counted_in_docs_compat() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "compat.md").read_text()
    accepted = len(TEMPLATES) - len(REFUSED)
    assert f"{accepted} of the {len(TEMPLATES)} templates" in text
    for name in REFUSED:
        assert f"`{name}`" in text, name
