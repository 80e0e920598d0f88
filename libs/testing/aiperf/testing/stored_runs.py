"""Runs stored through the results index's writer API, as the operator stores them (test support of
the results lib and the results server)."""

from __future__ import annotations

from aiperf.results.index import ResultsIndex
from aiperf.results.model import RunRecord

FILES = {"profile_export_aiperf.json": b'{"request_count": {"avg": 40}}\n', "profile_export_aiperf.csv": b"a,b\n1,2\n",
         "profile_export.jsonl": b"{}\n" * 100, "inputs.json": b'{"data": []}\n'}


async def complete(index: ResultsIndex, ns: str, name: str, epoch: str, *, uid: str = "uid-1",
                   files: dict[str, bytes] | None = None, completed_at: str = "2023-11-14T22:20:00Z") -> RunRecord | None:
    """Create run `epoch` and take it through the success gate with `files`."""
    await index.record_created(ns, name, epoch, uid=uid, created_at="2023-11-14T22:13:20Z")
    staging = await index.stage(ns, name, epoch)
    for file_name, data in (FILES if files is None else files).items():
        (staging / file_name).write_bytes(data)
    return await index.record_completed(ns, name, epoch, uid=uid, staging=staging, created_at=None,
                                        completed_at=completed_at)
