"""Several models in one benchmark (AIPerf's `--model a,b,c --model-selection-strategy`): a real
`aiperf profile` against the mock gives each turn its model when the dataset is built, shows it in
`inputs.json`, sends it in the request (the mock echoes it in every reply) and records it as the
raw export's `model_name`."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import orjson
import pytest
from e2e._harness import aiperf

from aiperf.dataset.model_selection import model_sequence
from aiperf.mock_server.testing import running_mock

pytestmark = pytest.mark.slow

MODELS = ["alpha", "beta", "gamma"]


def test_each_request_goes_to_its_turns_model(tmp_path: Path) -> None:
    artifacts = tmp_path / "a"
    with running_mock("--ttft-ms", "2", "--itl-ms", "1", "--output-tokens", "3") as server:
        run = aiperf("profile", "--model", ",".join(MODELS), "--model-selection-strategy", "random",
                     "--random-seed", "11", "--url", server.url, "--streaming", "--concurrency", "2",
                     "--request-count", "24", "--num-dataset-entries", "24", "--isl", "16", "--osl", "3",
                     "--workers-max", "2", "--record-processors", "1", "--export-level", "raw",
                     artifacts=artifacts)
    assert run.code == 0, run.stderr[-2000:]
    sessions = json.loads((artifacts / "inputs.json").read_text())["data"]
    planned = {(s["session_id"], i): p["model"] for s in sessions for i, p in enumerate(s["payloads"])}
    assert [planned[key] for key in planned] == model_sequence(MODELS, len(planned), strategy="random", seed=11)
    raw = [orjson.loads(line) for line in (artifacts / "profile_export_raw.jsonl").read_bytes().splitlines()]
    assert len(raw) == 24
    for line in raw:
        meta = line["metadata"]
        model = planned[(meta["conversation_id"], meta["turn_index"])]
        assert meta["model_name"] == model
        assert f'"model":"{model}"' in "".join(r["text"] for r in line["responses"])  # what the server got
    assert set(Counter(line["metadata"]["model_name"] for line in raw)) == set(MODELS)
