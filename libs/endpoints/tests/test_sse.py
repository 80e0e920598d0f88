"""SseParser: line endings, comments, multi-line data, any split of the byte stream."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from aiperf.endpoints import SseEvent, SseParser


def _feed_all(parts: list[bytes]) -> list[SseEvent]:
    p = SseParser()
    out: list[SseEvent] = []
    for i, part in enumerate(parts):
        out += p.feed(part, i)
    return out + p.finish()


def test_basic_events_with_timestamps() -> None:
    p = SseParser()
    assert p.feed(b'data: {"a":1}\n', 10) == []
    assert p.feed(b"\ndata: x\n\ndata: y", 20) == [SseEvent('{"a":1}', 20), SseEvent("x", 20)]
    assert p.feed(b"\n\n", 30) == [SseEvent("y", 30)]


def test_line_endings_comments_fields() -> None:
    stream = b": keepalive\r\nevent: error\r\ndata: a\r\ndata:b\r\nid: 7\r\n\r\ndata: c\r\rdata: d\n\n"
    assert _feed_all([stream]) == [SseEvent("a\nb", 0, "error", "7"), SseEvent("c", 0, "message", "7"),
                                   SseEvent("d", 0, "message", "7")]


def test_cr_then_lf_in_next_read_is_one_line_end() -> None:
    p = SseParser()
    assert p.feed(b"data: a\r", 1) == []
    assert p.feed(b"\n\r", 2) == [SseEvent("a", 2)]
    assert p.feed(b"\ndata: b\r\n\r\n", 3) == [SseEvent("b", 3)]


def test_split_inside_utf8_character() -> None:
    raw = "data: h\u00e9\u20ac\U0001f600\n\n".encode()
    parts = [raw[i:i + 1] for i in range(len(raw))]
    assert [e.data for e in _feed_all(parts)] == ["h\u00e9\u20ac\U0001f600"]


def test_bom_split_and_empty_data_and_done() -> None:
    parts = [b"\xef", b"\xbb", b"\xbfdata:\n\ndata: [DONE]\n\n"]
    assert [e.data for e in _feed_all(parts)] == ["", "[DONE]"]


def test_no_event_without_data_and_vertical_tab_is_not_newline() -> None:
    assert _feed_all([b"event: x\n\nretry: 5\n\ndata: a\x0bb\x1cc\n\n"]) == [SseEvent("a\x0bb\x1cc", 0)]


def test_finish_dispatches_unterminated_event() -> None:
    p = SseParser()
    assert p.feed(b"data: tail", 5) == []
    assert p.finish() == [SseEvent("tail", 5)]


_value = st.text(st.characters(exclude_characters="\r\n", exclude_categories=["Cs"]), max_size=12)
_event = st.tuples(st.lists(_value, min_size=1, max_size=3), st.sampled_from(["\n", "\r\n", "\r"]),
                   st.booleans())


def _encode(events: list[tuple[list[str], str, bool]]) -> bytes:
    out = []
    for lines, eol, comment in events:
        if comment:
            out.append(": note" + eol)
        out += ["data: " + line + eol for line in lines]
        out.append(eol)
    return "".join(out).encode()


@settings(max_examples=300, deadline=None)
@given(events=st.lists(_event, max_size=6), data=st.data())
def test_any_split_yields_same_events(events: list[tuple[list[str], str, bool]], data: st.DataObject) -> None:
    raw = _encode(events)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=12)))
    parts = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    expected = ["\n".join(lines) for lines, _, _ in events]
    assert [e.data for e in _feed_all([raw])] == expected
    assert [e.data for e in _feed_all(parts)] == expected
    # merged: whole stream delivered as one read per event vs. byte by byte
    assert [e.data for e in _feed_all([raw[i:i + 1] for i in range(len(raw))])] == expected
