"""parse_response: content, timing, usage and errors for chat, completions and embeddings."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from aiperf.endpoints import ContentResponse, EndpointType, FirstContent, Usage, parse_response
from aiperf.messages import ErrorDetails, Phase, RequestRecord

CHAT, COMPLETIONS, EMBEDDINGS = EndpointType.CHAT, EndpointType.COMPLETIONS, EndpointType.EMBEDDINGS


def _record(chunks: list[bytes], ts: list[int] | None = None, **kw: object) -> RequestRecord:
    ts = ts if ts is not None else [100 + i for i in range(len(chunks))]
    args: dict = {"worker_id": "w", "phase": Phase.PROFILING, "credit_num": 0, "conversation_id": "c",
                  "status": 200, "start_ns": 10, "end_ns": 500, "chunks": chunks, "chunk_ns": ts}
    args.update(kw)
    return RequestRecord(**args)


def _sse(obj: object) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else orjson.dumps(obj)) + b"\n\n"


def _chunk(content: str | None = None, reasoning: str | None = None) -> dict:
    delta: dict = {}
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}


USAGE = {"object": "chat.completion.chunk", "choices": [],
         "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8,
                   "completion_tokens_details": {"reasoning_tokens": 1}}}


def test_chat_stream_content_reasoning_usage() -> None:
    chunks = [_sse(_chunk(content="", reasoning=None)) + _sse(_chunk(reasoning="th")),
              _sse(_chunk(content="He")), _sse(_chunk(content="llo")),
              _sse(USAGE) + _sse(b"[DONE]")]
    p = parse_response(CHAT, True, _record(chunks, [40, 48, 56, 60]))
    assert p.ok and p.streamed
    assert p.responses == [ContentResponse(40, "", "th"), ContentResponse(48, "He"),
                           ContentResponse(56, "llo")]
    assert p.text == "Hello" and p.reasoning_text == "th"
    assert p.usage == Usage(5, 3, 8, 1)
    assert p.last_response_ns == 60


def test_event_split_across_reads_takes_completing_read_timestamp() -> None:
    raw = _sse(_chunk(content="a")) + _sse(_chunk(content="b"))
    p = parse_response(CHAT, True, _record([raw[:7], raw[7:-1], raw[-1:]], [1, 2, 3]))
    assert [(r.ts_ns, r.text) for r in p.responses] == [(2, "a"), (3, "b")]


def test_completions_stream_and_events_after_done_ignored() -> None:
    mk = lambda t: {"object": "text_completion", "choices": [{"text": t}]}  # noqa: E731
    chunks = [_sse(mk("x")), _sse(mk("y")), _sse(b"[DONE]"), _sse(mk("z"))]
    p = parse_response(COMPLETIONS, True, _record(chunks))
    assert p.text == "xy" and p.usage is None


def test_non_streaming_chat_one_response_at_end() -> None:
    body = orjson.dumps({"object": "chat.completion", "choices": [{"message": {"content": "ok"}}],
                         "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}})
    p = parse_response(CHAT, False, _record([body[:5], body[5:]], end_ns=777))
    assert p.responses == [ContentResponse(777, "ok")] and p.usage == Usage(1, 2, 3)
    assert not p.streamed


def test_server_ignoring_stream_flag_is_parsed_as_json() -> None:
    body = orjson.dumps({"object": "text_completion", "choices": [{"text": "t"}]})
    p = parse_response(COMPLETIONS, True, _record([body], end_ns=900))
    assert p.ok and not p.streamed and p.responses == [ContentResponse(900, "t")]


def test_http_error_keeps_openai_message() -> None:
    body = orjson.dumps({"error": {"message": "model not found", "type": "NotFoundError", "code": 404}})
    p = parse_response(CHAT, True, _record([body], status=404))
    assert p.error == ErrorDetails(type="Not Found", message="model not found", code=404)


def test_http_error_plain_body() -> None:
    p = parse_response(CHAT, False, _record([b"boom"], status=500))
    assert p.error == ErrorDetails(type="Internal Server Error", message="boom", code=500)


def test_invalid_json_body() -> None:
    p = parse_response(CHAT, False, _record([b"<html>"]))
    assert p.error is not None and p.error.type == "InvalidResponse"


def test_malformed_sse_event() -> None:
    p = parse_response(CHAT, True, _record([_sse(_chunk(content="a")), b"data: {oops\n\n"]))
    assert p.error is not None and p.error.type == "InvalidResponse"
    assert p.text == "a"


def test_error_event_in_stream() -> None:
    err = {"error": {"message": "overloaded", "type": "server_error", "code": 503}}
    p = parse_response(CHAT, True, _record([_sse(_chunk(content="a")), _sse(err)]))
    assert p.error == ErrorDetails(type="server_error", message="overloaded", code=503)
    p2 = parse_response(CHAT, True, _record([b"event: error\ndata: went away\n\n"]))
    assert p2.error == ErrorDetails(type="StreamError", message="went away", code=200)


def test_no_content_is_invalid_inference_result() -> None:
    p = parse_response(CHAT, True, _record([_sse(USAGE), _sse(b"[DONE]")]))
    assert p.error is not None and p.error.type == "InvalidInferenceResultError"
    assert p.usage is not None


def test_transport_error_and_cancel_pass_through() -> None:
    err = ErrorDetails(type="TimeoutError", message="read timeout")
    assert parse_response(CHAT, True, _record([], error=err)).error == err
    cancelled = parse_response(CHAT, True, _record([], cancelled=True)).error
    assert cancelled is not None and cancelled.type == "RequestCancellationError"


def test_embeddings() -> None:
    ok = orjson.dumps({"object": "list", "data": [{"embedding": [0.1]}], "usage": {"prompt_tokens": 2}})
    p = parse_response(EMBEDDINGS, False, _record([ok]))
    assert p.ok and p.responses == [] and p.usage == Usage(prompt_tokens=2)
    empty = parse_response(EMBEDDINGS, False, _record([b'{"data": []}']))
    assert empty.error is not None


@settings(max_examples=200, deadline=None)
@given(events=st.lists(st.sampled_from(["role", "empty", "text", "reasoning", "usage", "bad", "error"]),
                       max_size=8),
       cuts=st.lists(st.integers(min_value=1, max_value=400), max_size=12))
def test_first_content_fires_once_at_the_read_parse_response_stamps_first(events: list[str],
                                                                          cuts: list[int]) -> None:
    body = {"role": _sse({"choices": [{"delta": {"role": "assistant"}}]}), "empty": _sse(_chunk(content="")),
            "text": _sse(_chunk(content="hi")), "reasoning": _sse(_chunk(reasoning="hm")), "usage": _sse(USAGE),
            "bad": _sse(b"{not json"), "error": b"event: error\ndata: {}\n\n"}
    raw = b"".join(body[e] for e in events) + _sse(b"[DONE]")
    points = sorted({c for c in cuts if c < len(raw)})
    reads = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    watch = FirstContent(CHAT)
    fired = [i for i, read in enumerate(reads) if watch.feed(read, i)]
    firsts = [r.ts_ns for r in parse_response(CHAT, True, _record(reads, list(range(len(reads))))).responses]
    # parse_response stops at the first error event or bad JSON; the watcher reads on (the
    # slot comes back at the return anyway): compare up to the first such event
    clean = events[:next((i for i, e in enumerate(events) if e in ("bad", "error")), len(events))]
    if "text" in clean or "reasoning" in clean:
        assert fired == firsts[:1]
    else:
        assert len(fired) <= 1 and ("text" in events or "reasoning" in events or not fired)
