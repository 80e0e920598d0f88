"""Finding and reading the exports of runs and sweeps (real files from mock-server runs)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import orjson
import pytest

from aiperf.plot import PlotInputError, load_inputs


def _lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def test_a_run_folder_gives_its_per_request_values_and_spans(data: Path) -> None:
    (run,) = load_inputs([data / "streaming"]).runs
    records = _lines(data / "streaming" / "profile_export.jsonl")
    ok = [r for r in records if "error" not in r]
    assert run.label == "streaming"
    assert len(ok) < len(records)  # the fixture has failures
    assert run.ttft_ms == [r["metrics"]["time_to_first_token"]["value"] for r in ok]
    assert run.latency_ms == [r["metrics"]["request_latency"]["value"] for r in ok]
    assert len(run.itl_ms) == len(ok)
    assert len(run.spans) == len(records)
    assert sum(s.failed for s in run.spans) == len(records) - len(ok)
    assert all(s.first_token_ns is None for s in run.spans if s.failed)
    assert all(s.start_ns < s.first_token_ns <= s.end_ns for s in run.spans if not s.failed)  # type: ignore[operator]
    assert [s.start_ns for s in run.spans] == sorted(s.start_ns for s in run.spans)
    assert run.stat("request_count", "avg") == len(ok)


def test_without_streaming_there_is_no_ttft(data: Path) -> None:
    (run,) = load_inputs([data / "plain"]).runs
    assert run.ttft_ms == [] and run.itl_ms == []
    assert len(run.latency_ms) == 8
    assert all(s.first_token_ns is None and not s.failed for s in run.spans)


def test_a_sweep_folder_gives_a_run_per_variation_and_the_sweep(data: Path) -> None:
    inputs = load_inputs([data / "sweep"])
    assert [r.label for r in inputs.runs] == ["concurrency_1", "concurrency_3"]
    assert all(len(r.latency_ms) == 9 for r in inputs.runs)
    (sweep,) = inputs.sweeps
    assert sweep.parameters == ["concurrency"]
    assert [p.parameters for p in sweep.points] == [{"concurrency": 1.0}, {"concurrency": 3.0}]
    assert sweep.points[1].value("request_throughput", "avg") > sweep.points[0].value("request_throughput", "avg")


def test_a_folder_of_runs_is_searched_one_level_down(data: Path) -> None:
    inputs = load_inputs([data])
    assert [r.label for r in inputs.runs] == ["plain", "streaming", "concurrency_1", "concurrency_3"]
    assert len(inputs.sweeps) == 1


def test_trials_of_a_variation_are_pooled_and_clashing_labels_made_unique(data: Path, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    shutil.copytree(data / "sweep", sweep)
    shutil.copytree(sweep / "profile_runs" / "trial_0001", sweep / "profile_runs" / "trial_0002")
    shutil.copytree(data / "streaming", tmp_path / "other" / "concurrency_1")
    inputs = load_inputs([sweep, tmp_path / "other" / "concurrency_1"])
    assert [r.label for r in inputs.runs] == ["sweep/concurrency_1", "concurrency_3", "other/concurrency_1"]
    assert len(inputs.runs[0].latency_ms) == 18


@pytest.mark.parametrize("make, expected", [
    (lambda p: p / "missing", "missing: no such folder"),
    (lambda p: p, "no profile exports"),
])
def test_a_folder_without_exports_is_one_line(tmp_path: Path, make, expected: str) -> None:
    (tmp_path / "logs").mkdir()
    with pytest.raises(PlotInputError, match=expected) as err:
        load_inputs([make(tmp_path)])
    assert "\n" not in str(err.value)


def test_a_broken_summary_names_the_file(data: Path, tmp_path: Path) -> None:
    shutil.copytree(data / "plain", tmp_path / "run")
    (tmp_path / "run" / "profile_export_aiperf.json").write_text("{not json")
    with pytest.raises(PlotInputError, match="profile_export_aiperf.json: not valid JSON"):
        load_inputs([tmp_path / "run"])


def test_a_cut_last_line_is_skipped_but_a_bad_line_inside_is_not(data: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(data / "plain", run)
    jsonl = run / "profile_export.jsonl"
    text = jsonl.read_bytes()
    jsonl.write_bytes(text + text[:50])  # a run still writing
    assert len(load_inputs([run]).runs[0].latency_ms) == 8
    jsonl.write_bytes(b"garbage\n" + text)
    with pytest.raises(PlotInputError, match=r"profile_export.jsonl:1: not a JSON line"):
        load_inputs([run])


def test_warmup_requests_are_left_out(data: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(data / "plain", run)
    records = _lines(run / "profile_export.jsonl")
    records[0]["metadata"]["benchmark_phase"] = "warmup"
    (run / "profile_export.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert len(load_inputs([run]).runs[0].spans) == 7
