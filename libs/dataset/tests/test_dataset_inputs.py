"""inputs.json has AIPerf 0.13's shape: {"data": [{"session_id", "payloads": [...]}]}."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from aiperf.dataset import Conversation, Turn, write_inputs_json


def _payload(turn: Turn) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": turn.text}], "model": "m"}
    if turn.max_tokens is not None:
        body["max_completion_tokens"] = turn.max_tokens
    return body


def test_inputs_json_shape(tmp_path: Path) -> None:
    conversations = [
        Conversation(id="session_000000", turns=[Turn(text="hi", input_tokens=1, max_tokens=5)]),
        Conversation(id="chat-2", turns=[Turn(text="a", input_tokens=1), Turn(text="b", input_tokens=1)]),
    ]
    path = write_inputs_json(tmp_path / "inputs.json", conversations, _payload)
    raw = path.read_bytes()
    assert raw.startswith(b'{\n  "data": [\n')
    assert orjson.loads(raw) == {"data": [
        {"session_id": "session_000000", "payloads": [
            {"messages": [{"role": "user", "content": "hi"}], "model": "m", "max_completion_tokens": 5}]},
        {"session_id": "chat-2", "payloads": [
            {"messages": [{"role": "user", "content": "a"}], "model": "m"},
            {"messages": [{"role": "user", "content": "b"}], "model": "m"}]},
    ]}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inputs.json"]


def test_inputs_json_empty(tmp_path: Path) -> None:
    path = write_inputs_json(tmp_path / "inputs.json", [], _payload)
    assert orjson.loads(path.read_bytes()) == {"data": []}
