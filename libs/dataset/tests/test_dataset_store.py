"""dataset.dat + index.dat: any conversations round-trip through the mmap reader and zstd copies."""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiperf.dataset import (
    DATA_FILE,
    INDEX_FILE,
    Conversation,
    DatasetError,
    DatasetReader,
    Turn,
    decompress_dataset,
    write_dataset,
)

_floats = st.floats(allow_nan=False, allow_infinity=False)
_json = st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | _floats | st.text(),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(), c, max_size=3),
                     max_leaves=5)
_turns = st.builds(
    Turn,
    text=st.text(),
    input_tokens=st.integers(0, 2**31),
    max_tokens=st.none() | st.integers(1, 2**31),
    timestamp_ms=st.none() | _floats,
    delay_ms=st.none() | _floats,
    texts=st.lists(st.text(), max_size=3),
    role=st.none() | st.text(max_size=8),
    images=st.lists(st.text(max_size=10), max_size=2),
    extra=st.dictionaries(st.text(max_size=8), _json, max_size=3),
)
_conversations = st.lists(st.builds(Conversation, id=st.text(), turns=st.lists(_turns, max_size=4)),
                          max_size=12, unique_by=lambda c: c.id)


@settings(max_examples=150, deadline=None)
@given(conversations=_conversations, compress=st.booleans())
def test_any_conversations_round_trip(conversations: list[Conversation], compress: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        files = write_dataset(tmp, conversations, compress=compress)
        assert files.count == len(conversations)
        with DatasetReader(tmp) as reader:
            assert len(reader) == len(conversations)
            assert [reader.conversation(i) for i in range(len(reader))] == conversations
            assert reader.ids() == [c.id for c in conversations]
            for conversation in conversations:
                assert reader.conversation_by_id(conversation.id) == conversation
            expected = [c.turns[0].timestamp_ms if c.turns else None for c in conversations]
            assert reader.timestamps() == expected
        if compress:
            assert files.data_zst is not None and files.index_zst is not None
            out = decompress_dataset(tmp, Path(tmp) / "unpacked")
            assert out.count == len(conversations) and out.data_bytes == files.data_bytes
            assert Path(out.data).read_bytes() == Path(files.data).read_bytes()
            assert Path(out.index).read_bytes() == Path(files.index).read_bytes()


def _sample(n: int) -> list[Conversation]:
    return [Conversation(id=f"c{i}", turns=[Turn(text="word " * 400, input_tokens=401, max_tokens=100,
                                                 timestamp_ms=float(i * 10) if i % 2 else None)])
            for i in range(n)]


def test_reader_errors_and_lookup(tmp_path: Path) -> None:
    write_dataset(tmp_path, _sample(3))
    with DatasetReader(tmp_path) as reader:
        for bad in (-1, 3):
            with pytest.raises(IndexError):
                reader.conversation(bad)
        with pytest.raises(KeyError):
            reader.conversation_by_id("missing")
        assert reader.timestamps() == [None, 10.0, None]
        kept = reader.conversation(1)
    assert kept.turns[0].timestamp_ms == 10.0  # still valid after close
    reader.close()  # idempotent


def test_nan_timestamp_reads_back_as_none_only_when_absent(tmp_path: Path) -> None:
    write_dataset(tmp_path, [Conversation(id="a", turns=[]), Conversation(id="b", turns=[
        Turn(text="", input_tokens=0, timestamp_ms=0.0)])])
    with DatasetReader(tmp_path) as reader:
        assert reader.timestamps() == [None, 0.0]
        assert not any(isinstance(t, float) and math.isnan(t) for t in reader.timestamps())


def test_missing_truncated_or_foreign_files(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="cannot open dataset file"):
        DatasetReader(tmp_path)
    write_dataset(tmp_path, _sample(4))
    data = tmp_path / DATA_FILE
    data.write_bytes(data.read_bytes()[:-10])
    with pytest.raises(DatasetError, match="index expects"):
        DatasetReader(tmp_path)
    (tmp_path / INDEX_FILE).write_bytes(b"garbage" * 10)
    with pytest.raises(DatasetError, match="not an aiperf dataset index"):
        DatasetReader(tmp_path)
    (tmp_path / INDEX_FILE).write_bytes(b"")
    with pytest.raises(DatasetError, match="truncated"):
        DatasetReader(tmp_path)


def test_decompress_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="dataset.dat.zst: cannot decompress"):
        decompress_dataset(tmp_path, tmp_path / "out")
    write_dataset(tmp_path / "src", _sample(2), compress=True)
    (tmp_path / "src" / "index.dat.zst").write_bytes(b"not zstd at all")
    with pytest.raises(DatasetError, match="index.dat.zst: cannot decompress"):
        decompress_dataset(tmp_path / "src", tmp_path / "out")
    assert not list((tmp_path / "out").glob("*.tmp"))


def test_rewrite_is_atomic_and_leaves_no_temp_files(tmp_path: Path) -> None:
    write_dataset(tmp_path, _sample(2))
    reader = DatasetReader(tmp_path)
    write_dataset(tmp_path, _sample(5), compress=True)
    assert len(reader) == 2 and reader.conversation(1).id == "c1"  # old mapping unaffected
    reader.close()
    with DatasetReader(tmp_path) as fresh:
        assert len(fresh) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dataset.dat", "dataset.dat.zst", "index.dat",
                                                          "index.dat.zst"]


def test_reading_one_conversation_is_microseconds(tmp_path: Path) -> None:
    write_dataset(tmp_path, _sample(1000))
    with DatasetReader(tmp_path) as reader:
        start = time.perf_counter()
        for i in range(20_000):
            reader.conversation(i % 1000)
        per_read = (time.perf_counter() - start) / 20_000
    assert per_read < 50e-6, per_read  # ~1-2 µs on the dev box
