"""docs/run-protocol.md lists the control commands as the code defines them: the table between
its `generated` markers is rendered from `aiperf.messages` (regenerate with UPDATE_GOLDEN=1)."""

from __future__ import annotations

import inspect
import os
import typing
from pathlib import Path

import msgspec

from aiperf import messages

DOC = Path(__file__).resolve().parents[2] / "docs" / "run-protocol.md"
BEGIN, END = "<!-- generated: commands (tests/architecture/test_docs.py) -->", "<!-- end generated -->"


def _fields(cls: type) -> str:
    own = [f for f in msgspec.structs.fields(cls) if f.name not in ("request_id", "service_id")]
    return ", ".join(f.name for f in own) or "-"


def _summary(cls: type) -> str:
    return " ".join((inspect.getdoc(cls) or "").split())


def render() -> str:
    """The markdown table of every command and reply type."""
    rows = ["| command (fields) | answered with (fields) | what it asks |", "|---|---|---|"]
    for command in typing.get_args(messages.ToService):
        reply = command.reply
        rows.append(f"| `{command.__name__}` ({_fields(command)}) | `{reply.__name__}` ({_fields(reply)}) "
                    f"| {_summary(command)} |")
    rows.append(f"| any, when refused | `CommandFailed` ({_fields(messages.CommandFailed)}) "
                f"| {_summary(messages.CommandFailed)} |")
    return "\n".join(rows)


def test_the_protocol_doc_lists_the_commands_of_the_code() -> None:
    text = DOC.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    fresh = f"{head}{BEGIN}\n{render()}\n{END}{tail}"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        DOC.write_text(fresh)
    assert BEGIN in text and END in text
    assert text == fresh, "docs/run-protocol.md is stale: regenerate with UPDATE_GOLDEN=1 and review"
