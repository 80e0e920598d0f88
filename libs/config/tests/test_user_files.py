"""`artifacts.userFiles`: AIPerf's shapes and rules, checked when the config is read, and the files
written at the run's start with the config's variables and the run's names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from aiperf.config import ConfigError, decode_benchmark, normalize
from aiperf.config.templating import render_document
from aiperf.config.user_files import write_user_files

Doc = dict[str, Any]


def read(files: list[Doc], variables: Doc | None = None) -> Any:
    envelope: Doc = {"benchmark": {"model": "m", "endpoint": {"url": "http://h:8000/v1/chat/completions"},
                                   "artifacts": {"userFiles": files}}}
    if variables is not None:
        envelope["variables"] = variables
    document, _ = normalize(render_document(envelope, {}))
    return decode_benchmark(document)


def test_the_format_follows_the_content_unless_given() -> None:
    got = read([{"path": "a.json", "content": {"x": 1}}, {"path": "b.md", "content": "hi"},
                {"path": "c.yaml", "format": "yaml", "content": ["{{ model }}"]}])
    assert [(f.path, f.format) for f in got.artifacts.user_files] == [("a.json", "json"), ("b.md", "text"),
                                                                      ("c.yaml", "yaml")]


def test_the_variables_travel_with_the_user_files_only() -> None:
    got = read([{"path": "a", "content": "{{ n }}"}], variables={"n": 3, "m": "{{ n * 2 }}"})
    assert got.variables == {"n": 3, "m": 6}
    document, _ = normalize(render_document({"variables": {"n": 3}, "benchmark": {"model": "{{ n }}"}}, {}))
    assert "variables" not in document


@pytest.mark.parametrize(("entry", "message"), [
    ({"path": "/etc/x", "content": "a"}, "an absolute path"),
    ({"path": "a/../../x", "content": "a"}, "'..' in the path"),
    ({"path": "a\nb", "content": "a"}, "a control character"),
    ({"path": "x.json", "format": "json", "content": "text"}, "format json needs structured content"),
    ({"path": "x.txt", "format": "text", "content": {"a": 1}}, "format text needs a string"),
    ({"path": "x.txt", "content": "{{ nope }}"}, "artifacts.user_files 'x.txt': 'nope' is undefined"),
    ({"path": "x.txt", "content": "{{ model"}, "artifacts.user_files 'x.txt': "),
])
def test_a_bad_user_file_is_refused_when_the_config_is_read(entry: Doc, message: str) -> None:
    with pytest.raises(ConfigError, match=None) as caught:
        read([entry])
    assert message in str(caught.value)


def test_the_files_are_written_with_the_variables_and_the_runs_names(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIPERF_NAMESPACE", "bench")
    benchmark = read([
        {"path": "in.json", "content": {"n": "{{ n }}", "flag": "{{ on }}", "kept": "7", "model": "{{ model }}",
                                        "epoch": "{{ epoch }}", "job": "{{ job_name }}", "ns": "{{ namespace }}"}},
        {"path": "meta/run.yaml", "format": "yaml", "content": {"dir": "{{ artifact_dir }}", "url": "{{ endpoint_url }}",
                                                                 "model": "{{ model }}"}},
        {"path": "README.md", "content": "# {{ job_name }}\n{{ n * 2 }} users\n"}],
        variables={"n": 4, "on": True, "model": "shadowed by the run's name"})
    run = tmp_path / "my-run"
    assert write_user_files(benchmark, run) == ["in.json", "meta/run.yaml", "README.md"]
    doc = json.loads((run / "in.json").read_text())
    assert doc["n"] == 4 and doc["flag"] is True and doc["kept"] == "7" and doc["model"] == "m"
    assert doc["job"] == "my-run" and doc["ns"] == "bench" and isinstance(doc["epoch"], int)
    assert (run / "in.json").read_text().startswith('{\n  "n": 4,')
    meta = yaml.safe_load((run / "meta/run.yaml").read_text())
    assert meta == {"dir": str(run.resolve()), "url": "http://h:8000/v1/chat/completions", "model": "m"}
    assert (run / "README.md").read_text() == "# my-run\n8 users\n"
    assert write_user_files(benchmark, run, job_name="job-7", namespace="")[0] == "in.json"
    assert json.loads((run / "in.json").read_text())["job"] == "job-7"


def test_a_file_that_would_land_outside_the_folder_is_refused(tmp_path: Path) -> None:
    benchmark = read([{"path": "link/x.txt", "content": "a"}])
    run, outside = tmp_path / "run", tmp_path / "outside"
    run.mkdir()
    outside.mkdir()
    (run / "link").symlink_to(outside)
    with pytest.raises(ConfigError, match="'link/x.txt': resolves outside the artifact folder"):
        write_user_files(benchmark, run)
    assert not (outside / "x.txt").exists()
