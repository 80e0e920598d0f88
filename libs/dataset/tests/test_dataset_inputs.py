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


def test_streamed_inputs_json_is_the_whole_document_dumped_at_once(tmp_path: Path) -> None:
    # written one conversation at a time, byte for byte what one orjson.dumps of it all gives
    import numpy as np

    def payload(turn: Turn) -> dict[str, object]:
        return {"messages": [{"role": "user", "content": turn.text}], "v": np.arange(2), "e": {}, "l": []}

    for n in (0, 1, 3):
        convs = [Conversation(id=f"s{i}", turns=[Turn(text=f"a\nb {i}", input_tokens=2), Turn(text="c", input_tokens=1)])
                 for i in range(n)]
        written = write_inputs_json(tmp_path / f"inputs{n}.json", convs, payload)
        whole = {"data": [{"session_id": c.id, "payloads": [payload(t) for t in c.turns]} for c in convs]}
        assert written.read_bytes() == orjson.dumps(whole, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)
