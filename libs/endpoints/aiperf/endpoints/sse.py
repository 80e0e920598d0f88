"""Incremental Server-Sent Events parser over raw network reads.

Follows the WHATWG event-stream grammar: lines end with ``\\r\\n``, ``\\n`` or ``\\r``; lines
starting with ``:`` are comments; ``data`` fields accumulate (joined by ``\\n``); a blank line
dispatches the event. Reads may split the stream at any byte (inside a multi-byte UTF-8
character, between ``\\r`` and ``\\n``) or carry several events: lines are cut on bytes (CR and
LF never occur inside a UTF-8 sequence) and decoded only once complete. A line spread over many
reads costs time linear in its size (the reads are kept and joined once, when it ends).
"""

from __future__ import annotations

from dataclasses import dataclass

_BOM = b"\xef\xbb\xbf"
_TERMINATORS = (b"\n", b"\r")


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event. `ts_ns` is the timestamp of the read that delivered its blank line."""

    data: str
    ts_ns: int
    event: str = "message"
    id: str = ""


class SseParser:
    """Turns a byte stream, fed one network read at a time, into `SseEvent`s.

    Not thread-safe; one parser per response. `feed` never blocks and never raises on bad input:
    undecodable bytes become U+FFFD, unknown fields are ignored (as the spec says).
    """

    __slots__ = ("_pending", "_skip_lf", "_started", "_data", "_has_data", "_event", "_id", "_last_ts")

    def __init__(self) -> None:
        self._pending: list[bytes] = []
        self._skip_lf = False
        self._started = False
        self._data: list[bytes] = []
        self._has_data = False
        self._event = b""
        self._id = b""
        self._last_ts = 0

    def feed(self, data: bytes, ts_ns: int) -> list[SseEvent]:
        """Consume one read's bytes and return the events whose blank line it delivered."""
        if not data:
            return []
        self._last_ts = ts_ns
        if self._skip_lf:
            self._skip_lf = False
            if data[:1] == b"\n":
                data = data[1:]
                if not data:
                    return []
        pending = self._pending
        if pending and self._started and b"\n" not in data and b"\r" not in data:
            pending.append(data)  # the line goes on: join once it ends, not on every read
            return []
        if pending:
            pending.append(data)
            buf = b"".join(pending)
            pending.clear()
        else:
            buf = data
        if not self._started:
            if len(buf) < len(_BOM) and _BOM.startswith(buf):
                pending.append(buf)
                return []
            self._started = True
            if buf.startswith(_BOM):
                buf = buf[len(_BOM):]
        lines = buf.splitlines(keepends=True)
        if lines and not lines[-1].endswith(_TERMINATORS):
            pending.append(lines.pop())
        else:
            # A trailing CR may be the first half of CRLF: drop an LF that starts the next read.
            self._skip_lf = buf.endswith(b"\r")
        events: list[SseEvent] = []
        for raw in lines:
            self._line(raw.rstrip(b"\r\n"), ts_ns, events)
        return events

    def finish(self) -> list[SseEvent]:
        """End of stream: dispatch an event left without its blank line (lenient, unlike the spec).

        Returns at most one event, stamped with the last read's timestamp; resets the parser.
        """
        events: list[SseEvent] = []
        if self._pending:
            self._line(b"".join(self._pending), self._last_ts, events)
            self._pending.clear()
        self._line(b"", self._last_ts, events)
        return events

    def _line(self, line: bytes, ts_ns: int, events: list[SseEvent]) -> None:
        if not line:
            if self._has_data:
                data = b"\n".join(self._data).decode("utf-8", "replace")
                event = self._event.decode("utf-8", "replace") if self._event else "message"
                events.append(SseEvent(data, ts_ns, event, self._id.decode("utf-8", "replace")))
            self._data = []
            self._has_data = False
            self._event = b""
            return
        if line[:1] == b":":
            return
        field, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if field == b"data":
            self._data.append(value)
            self._has_data = True
        elif field == b"event":
            self._event = value
        elif field == b"id" and b"\x00" not in value:
            self._id = value
