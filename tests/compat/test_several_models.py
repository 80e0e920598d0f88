"""Several models with a selection strategy, as AIPerf 0.13.0 runs them: one config file
(`models: {strategy: random, items: [...]}`, `randomSeed`) run by AIPerf's `aiperf profile` and by
ours against the mock gives every turn the same model, in `inputs.json` (where AIPerf records it;
its per-record exports do not name the model)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from _oracle import find_oracle

from aiperf.mock_server.testing import running_mock

MODELS = ["alpha", "beta", "gamma"]


def _models(inputs: Path) -> list[str]:
    return [p["model"] for s in json.loads(inputs.read_text())["data"] for p in s["payloads"]]


def test_each_turn_gets_aiperfs_model(tmp_path: Path) -> None:
    oracle = find_oracle()
    tokenizer = oracle.make_tokenizer(tmp_path / "tokenizer")
    with running_mock("--ttft-ms", "2", "--itl-ms", "1", "--output-tokens", "3") as server:
        config = tmp_path / "models.yaml"
        config.write_text(yaml.safe_dump({"randomSeed": 11, "benchmark": {
            "models": {"strategy": "random", "items": [{"name": m} for m in MODELS]},
            "endpoint": {"url": server.url, "streaming": True}, "tokenizer": {"name": str(tokenizer)},
            "dataset": {"type": "synthetic", "entries": 12, "prompts": {"isl": 16, "osl": 3}},
            "profiling": {"type": "concurrency", "concurrency": 2, "requests": 12},
            "runtime": {"workers": 1, "recordProcessors": 1}}}))
        theirs_dir, ours_dir = tmp_path / "theirs", tmp_path / "ours"
        theirs = oracle.run("profile", "--config", str(config), "--ui-type", "none", "--artifact-dir",
                            str(theirs_dir), cwd=tmp_path, timeout=300, env={"HF_HUB_OFFLINE": None})
        assert theirs.returncode == 0, (theirs.stdout + theirs.stderr)[-3000:]
        ours = subprocess.run([sys.executable, "-m", "aiperf.cli", "profile", "--config", str(config),
                               "--artifact-dir", str(ours_dir)], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, check=False)
        assert ours.returncode == 0, ours.stderr[-3000:]
    expected = _models(theirs_dir / "inputs.json")
    assert len(expected) == 12 and set(expected) == set(MODELS)
    assert _models(ours_dir / "inputs.json") == expected
