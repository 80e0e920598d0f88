"""User dataset files: each type parsed with AIPerf's field names; errors name file and line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from aiperf.config import FileDataset
from aiperf.dataset import DatasetError, build_conversations, detect_type
from aiperf.tokenizer import Tokenizer
from tests._specs import dataset_spec

WriteJsonl = Callable[..., Path]


def _build(path: Path, tokenizer: Tokenizer, kind: str | None = None, **kwargs: object) -> list:
    spec = dataset_spec(input_file=str(path), custom_dataset_type=kind, **kwargs)  # type: ignore[arg-type]
    return build_conversations(spec, tokenizer, seed=1)


def test_single_turn(write_jsonl: WriteJsonl, tokenizer: Tokenizer) -> None:
    path = write_jsonl("single.jsonl", [
        {"text": "Hello there", "output_length": 12, "timestamp": 1000, "extra": {"temperature": 0.5}},
        "",
        {"texts": ["first", {"name": "passages", "contents": ["p1", "p2"]}], "delay": 250, "role": "user"},
        {"text": "Describe", "image": "http://x/a.png", "images": ["b.png"], "unknown_future_field": 1},
    ])
    first, second, third = _build(path, tokenizer, "single_turn")
    assert [c.id for c in (first, second, third)] == ["session_000000", "session_000001", "session_000002"]
    (turn,) = first.turns
    assert (turn.text, turn.max_tokens, turn.timestamp_ms, turn.extra) == ("Hello there", 12, 1000.0,
                                                                           {"temperature": 0.5})
    assert turn.input_tokens == tokenizer.count("Hello there")
    (turn,) = second.turns
    assert turn.text == "first\np1\np2" and turn.texts == ["first", "p1", "p2"]
    assert (turn.delay_ms, turn.role, turn.max_tokens, turn.timestamp_ms) == (250.0, "user", None, None)
    assert third.turns[0].images == ["http://x/a.png", "b.png"]


def test_single_turn_groups_by_session_id_and_uses_osl(write_jsonl: WriteJsonl, tokenizer: Tokenizer) -> None:
    path = write_jsonl("s.jsonl", [
        {"session_id": "a", "text": "one"}, {"session_id": "b", "text": "two"},
        {"session_id": "a", "text": "three", "delay": 10, "output_length": 5},
    ])
    a, b = _build(path, tokenizer, osl=64)
    assert (a.id, [t.text for t in a.turns], b.id) == ("a", ["one", "three"], "b")
    assert [t.max_tokens for t in a.turns] == [64, 5]


def test_multi_turn(write_jsonl: WriteJsonl, tokenizer: Tokenizer) -> None:
    path = write_jsonl("multi.jsonl", [
        {"session_id": "chat-1", "turns": [{"text": "hi", "timestamp": 5}, {"text": "more", "delay": 1500}]},
        {"turns": [{"texts": ["x", "y"], "output_length": 3}]},
    ])
    one, two = _build(path, tokenizer, "multi_turn")
    assert one.id == "chat-1" and [t.text for t in one.turns] == ["hi", "more"]
    assert (one.turns[0].timestamp_ms, one.turns[1].delay_ms) == (5.0, 1500.0)
    assert two.id == "session_000001" and two.turns[0].text == "x\ny" and two.turns[0].max_tokens == 3


def test_multi_turn_rejects_repeated_session(write_jsonl: WriteJsonl, tokenizer: Tokenizer) -> None:
    path = write_jsonl("multi.jsonl", [{"session_id": "s", "turns": [{"text": "a"}]},
                                       {"session_id": "s", "turns": [{"text": "b"}]}])
    with pytest.raises(DatasetError, match=r"multi\.jsonl:2: session_id 's' appears twice"):
        _build(path, tokenizer, "multi_turn")


def test_mooncake_trace_blocks_give_shared_prefixes(write_jsonl: WriteJsonl, tokenizer: Tokenizer) -> None:
    path = write_jsonl("trace.jsonl", [
        {"timestamp": 0, "input_length": 1200, "output_length": 40, "hash_ids": [1, 2, 3]},
        {"timestamp": 250, "input_length": 700, "output_length": 10, "hash_ids": [1, 4]},
        {"timestamp": 500, "input_length": 300, "output_length": 10, "hash_ids": [9]},
        {"timestamp": 750, "text_input": "literal prompt", "output_length": 7},
        {"timestamp": 900, "input_length": 100},
    ])
    convs = _build(path, tokenizer, "mooncake_trace", isl_block_size=256)
    turns = [c.turns[0] for c in convs]
    assert [t.timestamp_ms for t in turns] == [0.0, 250.0, 500.0, 750.0, 900.0]
    assert [t.input_tokens for t in turns] == [1200, 700, 300, tokenizer.count("literal prompt"), 100]
    assert [t.max_tokens for t in turns] == [40, 10, 10, 7, None]
    block1 = tokenizer.decode(tokenizer.encode(turns[0].text)[:250])
    assert turns[1].text.startswith(block1)
    assert not turns[2].text.startswith(block1[:40])
    for turn in turns[:3]:
        assert abs(tokenizer.count(turn.text) - turn.input_tokens) <= 3
    assert turns[3].text == "literal prompt"


def test_mooncake_same_seed_same_text_and_sessions(write_jsonl: WriteJsonl, tokenizer: Tokenizer) -> None:
    path = write_jsonl("trace.jsonl", [
        {"session_id": "u1", "timestamp": 0, "input_length": 600, "hash_ids": [7, 8]},
        {"session_id": "u1", "delay": 2000, "input_length": 50},
    ])
    (conv,) = _build(path, tokenizer)
    assert conv.id == "u1" and len(conv.turns) == 2 and conv.turns[1].delay_ms == 2000.0
    assert _build(path, tokenizer) == [conv]
    (other,) = build_conversations(dataset_spec(input_file=str(path)), tokenizer, seed=2)
    assert other.turns[0].text != conv.turns[0].text


def test_mooncake_line_without_length(write_jsonl: WriteJsonl, tokenizer: Tokenizer) -> None:
    path = write_jsonl("trace.jsonl", [{"input_length": 5}, {"timestamp": 3, "output_length": 2}])
    with pytest.raises(DatasetError, match=r"trace\.jsonl:2: needs 'input_length'"):
        _build(path, tokenizer, "mooncake_trace")


def test_random_pool_folder(write_jsonl: WriteJsonl, tokenizer: Tokenizer, tmp_path: Path) -> None:
    write_jsonl("pools/a_queries.jsonl", [{"text": "q1"}, {"text": "q2"}])
    write_jsonl("pools/b_passages.jsonl", [{"texts": ["p1", "p2"], "output_length": 9}, {"text": "p3"}])
    convs = _build(tmp_path / "pools", tokenizer, num_dataset_entries=50)
    assert len(convs) == 50
    for conv in convs:
        (turn,) = conv.turns
        assert turn.texts[0] in {"q1", "q2"} and turn.texts[1] in {"p1", "p3"}
        assert turn.max_tokens in {9, None}
    assert len({c.turns[0].text for c in convs}) == 4
    assert _build(tmp_path / "pools", tokenizer, num_dataset_entries=50) == convs


def test_random_pool_single_file(write_jsonl: WriteJsonl, tokenizer: Tokenizer) -> None:
    path = write_jsonl("pool.jsonl", [{"text": "a"}, {"text": "b"}, {"text": "c"}])
    convs = _build(path, tokenizer, "random_pool")
    assert len(convs) == 100 and {c.turns[0].text for c in convs} == {"a", "b", "c"}


@pytest.mark.parametrize(("row", "kind"), [
    ({"text": "x"}, "single_turn"), ({"turns": [{"text": "x"}]}, "multi_turn"),
    ({"input_length": 3, "hash_ids": [1]}, "mooncake_trace"), ({"text_input": "x"}, "mooncake_trace"),
])
def test_detect_type(write_jsonl: WriteJsonl, row: dict[str, object], kind: str) -> None:
    assert detect_type(write_jsonl("d.jsonl", ["", row])) == kind


def test_detect_folder_is_random_pool(tmp_path: Path) -> None:
    assert detect_type(tmp_path) == "random_pool"


def test_malformed_line_names_file_and_line(write_jsonl: WriteJsonl, tokenizer: Tokenizer) -> None:
    path = write_jsonl("data.jsonl", [{"text": "ok"}] * 16 + ['{"text": "broken'])
    with pytest.raises(DatasetError) as err:
        _build(path, tokenizer, "single_turn")
    assert str(err.value).startswith(f"{path}:17: not valid JSON: ")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("kind", "row", "expected"), [
    ("single_turn", {"text": 3}, r"d\.jsonl:1: not a valid single_turn record: Expected `str \| null`, got `int`"),
    ("single_turn", {"output_length": 3}, r"d\.jsonl:1: a turn needs 'text'"),
    ("single_turn", {"text": "a", "output_length": 0}, r"d\.jsonl:1: 'output_length' must be at least 1"),
    ("multi_turn", {"session_id": "x"}, r"d\.jsonl:1: not a valid multi_turn record: .*turns"),
    ("multi_turn", {"turns": []}, r"d\.jsonl:1: 'turns' is empty"),
    ("mooncake_trace", {"input_length": "12"}, r"d\.jsonl:1: not a valid mooncake_trace record"),
    ("mooncake_trace", [1, 2], r"d\.jsonl:1: not a valid mooncake_trace record: Expected `object`"),
])
def test_invalid_records(write_jsonl: WriteJsonl, tokenizer: Tokenizer, kind: str, row: object,
                         expected: str) -> None:
    path = write_jsonl("d.jsonl", [row if isinstance(row, dict) else str(row)])
    with pytest.raises(DatasetError, match=expected):
        _build(path, tokenizer, kind)


def test_missing_file_and_empty_file(write_jsonl: WriteJsonl, tokenizer: Tokenizer, tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="--input-file .*nope.jsonl: no such file or folder"):
        _build(tmp_path / "nope.jsonl", tokenizer)
    empty = write_jsonl("empty.jsonl", [""])
    with pytest.raises(DatasetError, match="empty.jsonl: no records"):
        _build(empty, tokenizer)
    with pytest.raises(DatasetError, match="empty.jsonl: no records"):
        _build(empty, tokenizer, "single_turn")


def test_unreadable_file(tmp_path: Path, tokenizer: Tokenizer) -> None:
    with pytest.raises(DatasetError, match=r": cannot read: Is a directory$"):
        _build(tmp_path, tokenizer, "single_turn")  # a folder given as a single_turn file


def test_an_unknown_format_is_refused_by_the_model() -> None:
    with pytest.raises(msgspec.ValidationError, match="Invalid enum value 'bailian_trace'"):
        msgspec.convert({"type": "file", "path": "x", "format": "bailian_trace"}, FileDataset)


@pytest.mark.parametrize(("lines", "message"), [
    ([{"input_length": 600, "hash_ids": [1, 2, 3]}],
     r"t.jsonl:1: 3 hash_ids but input_length 600 holds at most 2 blocks of 512 tokens \(--isl-block-size 512\)"),
    ([{"input_length": 600, "hash_ids": [1, 2]}, {"input_length": 1024, "hash_ids": [1, 2]}],
     r"t.jsonl:2: hash id 2 is a block of 512 tokens here but of 88 at .*t.jsonl:1"),
])
def test_mooncake_hash_ids_that_contradict_the_length_are_refused(
        write_jsonl: WriteJsonl, tokenizer: Tokenizer, lines: list[dict[str, object]], message: str) -> None:
    path = write_jsonl("t.jsonl", lines)
    with pytest.raises(DatasetError, match=message):
        _build(path, tokenizer, "mooncake_trace")


def test_mooncake_fewer_blocks_than_the_length_is_fine(write_jsonl: WriteJsonl, tokenizer: Tokenizer) -> None:
    path = write_jsonl("t.jsonl", [{"input_length": 1100, "hash_ids": [1]}, {"input_length": 512, "hash_ids": [1]}])
    first, second = _build(path, tokenizer, "mooncake_trace")
    assert first.turns[0].input_tokens == 1100 and second.turns[0].input_tokens == 512
