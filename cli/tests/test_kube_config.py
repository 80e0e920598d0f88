"""`aiperf kube init` and `--config FILE`: the starter file is accepted as written, and flags given
on the command line override its values."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from aiperf.cli.kube_config import config_tokens, prepare_kube_argv
from aiperf.cli.profile_args import FlagError

pytestmark = pytest.mark.anyio

Run = Callable[..., Awaitable[Any]]


def run_config(generated: str) -> dict[str, Any]:
    (config_map,) = (o for o in yaml.safe_load_all(generated) if o["kind"] == "ConfigMap")
    return json.loads(config_map["data"]["run_config.json"])


@pytest.mark.parametrize("file_name", ["aiperf-kube.yaml", "aiperf-kube.json"])
async def test_init_writes_a_config_that_generate_accepts(aiperf: Run, tmp_path: Path,
                                                          file_name: str) -> None:
    path = tmp_path / file_name
    written = await aiperf("kube", "init", "--output", str(path), "-n", "perf")
    assert written.code == 0 and written.out.startswith(f"wrote {path}")
    if file_name.endswith(".json"):
        assert json.loads(path.read_text())["namespace"] == "perf"
    else:
        assert "# Namespace to deploy into" in path.read_text()
    result = await aiperf("kube", "generate", "--config", str(path))
    assert result.code == 0, result.err
    docs = list(yaml.safe_load_all(result.out))
    assert [(d["kind"], d["metadata"]["name"], d["metadata"]["namespace"]) for d in docs] == [
        ("ServiceAccount", "aiperf-my-benchmark", "perf"), ("Role", "aiperf-my-benchmark", "perf"),
        ("RoleBinding", "aiperf-my-benchmark", "perf"), ("Secret", "aiperf-my-benchmark-curve", "perf"),
        ("ConfigMap", "aiperf-my-benchmark-config", "perf"), ("JobSet", "aiperf-my-benchmark", "perf")]
    benchmark = run_config(result.out)["benchmark"]
    assert (benchmark["models"], benchmark["phases"][-1]["concurrency"], benchmark["endpoint"]["streaming"]) == (
        ["Qwen/Qwen3-0.6B"], 16, True)
    again = await aiperf("kube", "init", "--output", str(path))
    assert again.code == 2
    assert again.err == f"error: --output {path}: the file exists; pass --force to overwrite it\n"
    assert (await aiperf("kube", "init", "--output", str(path), "--force")).code == 0


async def test_flags_override_the_config_file(aiperf: Run, tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({
        "name": "from-file", "namespace": "perf", "total-workers": 20, "labels": {"team": "file"},
        "tolerations": [{"key": "a", "operator": "Exists"}],
        "profile": {"model": "file-model", "concurrency": 4, "streaming": True}}))
    result = await aiperf("kube", "generate", "--config", str(path), "--name", "cli", "-m", "cli-model",
                          "--no-streaming", "--labels.team", "cli", "-n", "bench")
    assert result.code == 0, result.err
    docs = list(yaml.safe_load_all(result.out))
    assert docs[0]["metadata"]["name"] == "aiperf-cli" and docs[0]["metadata"]["namespace"] == "bench"
    assert docs[0]["metadata"]["labels"]["team"] == "cli"
    config = run_config(result.out)
    benchmark = config["benchmark"]
    assert (benchmark["models"], benchmark["phases"][-1]["concurrency"]) == (["cli-model"], 4)
    assert benchmark["endpoint"]["streaming"] is False
    assert config["services"]["worker_groups"] == 2  # 20 workers from the file, 10 per pod


def test_config_tokens_skip_given_flags_and_reject_unknown_keys(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("name: a\nimage_tag: v1\nimage_pull_secrets: [x, y]\n"
                    "profile:\n  model: m\n  header: [\"A:1\"]\n")
    assert config_tokens(str(path), ["--image-tag=v2", "-H", "B:2"]) == [
        "--name", "a", "--image-pull-secrets", "x", "--image-pull-secrets", "y", "--model", "m"]
    path.write_text("colour: red\n")
    with pytest.raises(FlagError, match=r"^--config .*: unknown key 'colour'; keys are flag names"):
        config_tokens(str(path), [])
    path.write_text("profile:\n  streaming: 3\n")
    with pytest.raises(FlagError, match=r"^--config .* profile streaming: expected true or false, not 3$"):
        config_tokens(str(path), [])
    path.write_text("- a\n")
    with pytest.raises(FlagError, match=r"^--config .*: expected an object of flag names to values$"):
        config_tokens(str(path), [])
    path.write_text("a: [\n")
    with pytest.raises(FlagError, match=r"^--config .*: not valid YAML or JSON \(line 2\)$"):
        config_tokens(str(path), [])
    with pytest.raises(FlagError, match=r"^--config .*nope: No such file or directory$"):
        prepare_kube_argv(["kube", "generate", "--config", str(tmp_path / "nope")])


async def test_a_bad_config_file_is_a_one_line_error(aiperf: Run, tmp_path: Path) -> None:
    result = await aiperf("kube", "profile", "--config", str(tmp_path / "nope.yaml"))
    assert result.code == 2
    assert result.err == f"error: --config {tmp_path / 'nope.yaml'}: No such file or directory\n"
