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
    None, list, dict, numpy arrays). Returns ``path``. Blocks; written atomically.
    """
    target = Path(path)
    data = [{"session_id": c.id, "payloads": [payload_of(turn) for turn in c.turns]} for c in conversations]
    tmp = target.with_name(target.name + ".tmp")
    try:
        tmp.write_bytes(orjson.dumps({"data": data}, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
        os.replace(tmp, target)
    except OSError:  # a full disk: no half-written inputs.json.tmp left behind
        tmp.unlink(missing_ok=True)
        raise
    return target
