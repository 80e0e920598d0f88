"""profile_export_raw.jsonl: a part is invisible until committed, a commit acknowledges the
size on disk, and the join refuses a part that is not what was acknowledged."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from aiperf.messages import ErrorDetails, Phase, RequestRecord
from aiperf.metrics import RawPartMismatch, RawPartWriter, join_parts, raw_json


def test_a_raw_line_keeps_every_read_with_its_time(make_record: Callable[..., RequestRecord]) -> None:
    record = make_record(3, phase=Phase.WARMUP, credit_num=7)
    line = raw_json(record)
    assert line["metadata"]["benchmark_phase"] == "warmup" and line["metadata"]["credit_num"] == 7
    assert line["start_perf_ns"] == record.start_ns and line["status"] == 200
    assert [r["perf_ns"] for r in line["responses"]] == record.chunk_ns
    assert "".join(r["text"] for r in line["responses"]).encode() == b"".join(record.chunks)
    assert "error" not in line


def test_a_failed_request_carries_its_error_and_undecodable_bytes_are_replaced(
        make_record: Callable[..., RequestRecord]) -> None:
    record = make_record(1, chunks=[b"\xff\xfe oops"], status=500,
                         error=ErrorDetails(type="Internal Server Error", message="boom", code=500))
    line = raw_json(record)
    assert line["error"] == {"code": 500, "type": "Internal Server Error", "message": "boom"}
    assert line["responses"][0]["text"] == "\ufffd\ufffd oops"


def test_a_part_appears_only_when_committed(tmp_path: Path, make_record: Callable[..., RequestRecord]) -> None:
    part = RawPartWriter(tmp_path / "rp-0.jsonl")
    part.write(make_record(2, credit_num=0))
    part.write(make_record(2, credit_num=1))
    assert not part.path.exists()
    size = part.commit()
    assert size == part.path.stat().st_size and part.count == 2
    assert [orjson.loads(x)["metadata"]["credit_num"] for x in part.path.read_bytes().splitlines()] == [0, 1]
    assert [p.name for p in tmp_path.iterdir()] == ["rp-0.jsonl"]


def test_join_checks_the_acknowledged_sizes(tmp_path: Path, make_record: Callable[..., RequestRecord]) -> None:
    parts = []
    for i in range(2):
        writer = RawPartWriter(tmp_path / f"rp-{i}.jsonl")
        writer.write(make_record(2, credit_num=i))
        parts.append((writer.path, writer.commit()))
    target = tmp_path / "profile_export_raw.jsonl"
    with pytest.raises(RawPartMismatch, match="acknowledged"):
        join_parts(target, [parts[0], (parts[1][0], parts[1][1] + 1)])
    with pytest.raises(RawPartMismatch, match="missing"):
        join_parts(target, [*parts, (tmp_path / "gone.jsonl", 10)])
    assert not target.exists()
    assert join_parts(target, parts) == parts[0][1] + parts[1][1]
    assert len(target.read_bytes().splitlines()) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile_export_raw.jsonl"]


def test_join_of_no_parts_is_an_empty_file(tmp_path: Path) -> None:
    assert join_parts(tmp_path / "raw.jsonl", []) == 0
    assert (tmp_path / "raw.jsonl").read_bytes() == b""


def test_a_discarded_part_leaves_nothing(tmp_path: Path, make_record: Callable[..., RequestRecord]) -> None:
    part = RawPartWriter(tmp_path / "rp.jsonl")
    part.write(make_record(1))
    part.discard()
    part.discard()
    assert list(tmp_path.iterdir()) == []
