"""``inputs.json``: the exact request bodies of a dataset, in AIPerf 0.13's shape."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from aiperf.dataset.model import Conversation, Turn

INPUTS_FILE = "inputs.json"

PayloadOf = Callable[[Turn], Mapping[str, Any]]


def write_inputs_json(path: str | os.PathLike[str], conversations: Iterable[Conversation],
                      payload_of: PayloadOf) -> Path:
    """Write ``{"data": [{"session_id": <id>, "payloads": [payload_of(turn), ...]}, ...]}``.

    One entry per conversation, one payload per turn, in order; indented by 2 like AIPerf's.
    ``payload_of`` must return JSON-serialisable mappings (orjson types: str, numbers, bool,
    None, list, dict, numpy arrays). Returns ``path``. Blocks; written atomically. Streams: one
    conversation's payloads in memory at a time (a 1M-token prompt is not copied per request
    into one document), the bytes the same as dumping the whole document at once.
    """
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    try:
        with open(tmp, "wb") as out:
            count = 0
            for conversation in conversations:
                entry = {"session_id": conversation.id, "payloads": [payload_of(turn) for turn in conversation.turns]}
                out.write(b'{\n  "data": [\n    ' if count == 0 else b",\n    ")
                # newlines inside JSON strings are escaped: every raw newline is indentation
                out.write(orjson.dumps(entry, option=_OPTIONS).replace(b"\n", b"\n    "))
                count += 1
            out.write(b"\n  ]\n}" if count else orjson.dumps({"data": []}, option=_OPTIONS))
        os.replace(tmp, target)
    except OSError:  # a full disk: no half-written inputs.json.tmp left behind
        tmp.unlink(missing_ok=True)
        raise
    return target


_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
