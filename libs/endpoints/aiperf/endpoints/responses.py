"""Parse a worker's raw `RequestRecord` into content responses, usage and errors.

Error types (`ErrorDetails.type`):

- the HTTP reason phrase (``"Internal Server Error"``) for status >= 400, as AIPerf; `message`
  is the OpenAI error message when the body is OpenAI error JSON, else the body text;
- ``"InvalidResponse"``: a body (or an SSE event) that is not JSON / not a JSON object;
- the server's ``error.type`` (or ``"StreamError"``) for an error object inside a 2xx body or
  stream, or an ``event: error`` SSE event;
- ``"InvalidInferenceResultError"`` (AIPerf's name): a 2xx answer with no content at all;
- ``"RequestCancellationError"`` for a record marked cancelled without an error of its own.
A record that already carries `error` (transport failure, timeout) keeps it unchanged.
"""

from __future__ import annotations

import http
from typing import Any

import orjson

from aiperf.endpoints.catalog import EndpointSpec, EndpointType, spec_of
from aiperf.endpoints.parsed import ContentResponse, ParsedResponse, Usage
from aiperf.endpoints.sse import SseEvent, SseParser
from aiperf.messages import ErrorDetails, RequestRecord

_DONE = "[DONE]"
_MAX_MESSAGE = 2000


class _BadBody(Exception):
    """A body or event that is not a JSON object."""


def parse_response(endpoint_type: EndpointType, streaming: bool, record: RequestRecord) -> ParsedResponse:
    """Parse `record` (see the module docstring for the error rules).

    Non-streaming: one content response stamped `record.end_ns` (the last read's timestamp when
    `end_ns` is 0). Streaming: one content response per SSE event with text, stamped with the
    read that completed the event; events after ``[DONE]`` are ignored. A streaming request the
    server answered with a plain JSON body is parsed as non-streaming (`streamed` False). What
    a body or event carries is the kind's response function (`aiperf.endpoints.catalog`); a kind
    that produces no tokens (embeddings) gives no content responses and succeeds when its
    function finds a result. Pure function: never raises on bad server output.
    """
    kind = spec_of(endpoint_type)
    if record.error is not None:
        return ParsedResponse(error=record.error, streamed=streaming)
    if record.cancelled:
        err = ErrorDetails(type="RequestCancellationError", message="Request was cancelled", code=499)
        return ParsedResponse(error=err, streamed=streaming)
    if record.status >= 400:
        return ParsedResponse(error=_http_error(record.status, b"".join(record.chunks)), streamed=streaming)
    if streaming and kind.streams:
        parsed = _parse_stream(kind, record)
    else:
        parsed = _parse_body(kind, record)
    if parsed.error is None and kind.produces_tokens and not parsed.responses:
        err = ErrorDetails(type="InvalidInferenceResultError", message=kind.no_result)
        return ParsedResponse(usage=parsed.usage, error=err, last_response_ns=parsed.last_response_ns,
                              streamed=parsed.streamed)
    return parsed


def _end_ts(record: RequestRecord) -> int:
    if record.end_ns:
        return record.end_ns
    return record.chunk_ns[-1] if record.chunk_ns else record.start_ns


def _loads(data: bytes | str) -> dict[str, Any]:
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise _BadBody(f"Response is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise _BadBody("Response is not a JSON object")
    return obj


def _invalid(message: str, code: int | None) -> ErrorDetails:
    return ErrorDetails(type="InvalidResponse", message=message, code=code or None)


def _http_error(status: int, body: bytes) -> ErrorDetails:
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = "HTTPError"
    text = body.decode("utf-8", "replace")
    message = text
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, dict):
        found = _error_message(obj.get("error", obj))
        if found:
            message = found
    return ErrorDetails(type=phrase, message=message[:_MAX_MESSAGE], code=status)


def _error_message(err: Any) -> str:
    if isinstance(err, dict):
        msg = err.get("message") or err.get("detail") or err.get("msg")
        return msg if isinstance(msg, str) else orjson.dumps(err).decode()
    return err if isinstance(err, str) else ""


def _embedded_error(obj: dict[str, Any], status: int) -> ErrorDetails | None:
    """An OpenAI-style error object inside a 2xx body or stream event."""
    err = obj.get("error")
    if not err:
        return None
    etype = err.get("type") if isinstance(err, dict) else None
    code = err.get("code") if isinstance(err, dict) else None
    return ErrorDetails(
        type=etype if isinstance(etype, str) and etype else "StreamError",
        message=(_error_message(err) or "error")[:_MAX_MESSAGE],
        code=code if isinstance(code, int) and not isinstance(code, bool) else (status or None),
    )


def _usage(obj: dict[str, Any]) -> Usage | None:
    u = obj.get("usage")
    if not isinstance(u, dict):
        return None
    details = u.get("completion_tokens_details")
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return Usage(
        prompt_tokens=_int(u.get("prompt_tokens")),
        completion_tokens=_int(u.get("completion_tokens")),
        total_tokens=_int(u.get("total_tokens")),
        reasoning_tokens=_int(reasoning),
    )


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _content(kind: EndpointSpec, obj: dict[str, Any], ts_ns: int) -> ContentResponse | None:
    found = kind.content(obj)
    return ContentResponse(ts_ns, *found) if found is not None else None


def _parse_body(kind: EndpointSpec, record: RequestRecord) -> ParsedResponse:
    ts = _end_ts(record)
    try:
        obj = _loads(b"".join(record.chunks))
    except _BadBody as exc:
        return ParsedResponse(error=_invalid(str(exc), record.status), last_response_ns=ts)
    err = _embedded_error(obj, record.status)
    usage = _usage(obj)
    if err is not None:
        return ParsedResponse(usage=usage, error=err, last_response_ns=ts)
    if not kind.produces_tokens:
        if kind.content(obj) is None:
            err = ErrorDetails(type="InvalidInferenceResultError", message=kind.no_result)
        return ParsedResponse(usage=usage, error=err, last_response_ns=ts)
    content = _content(kind, obj, ts)
    return ParsedResponse(responses=[content] if content else [], usage=usage, last_response_ns=ts)


class _Stream:
    """Accumulates one stream's events; `take` returns an error that ends the stream."""

    __slots__ = ("kind", "status", "responses", "usage", "last_ts", "saw_event", "done")

    def __init__(self, kind: EndpointSpec, status: int) -> None:
        self.kind, self.status = kind, status
        self.responses: list[ContentResponse] = []
        self.usage: Usage | None = None
        self.last_ts = 0
        self.saw_event = False
        self.done = False

    def take(self, ev: SseEvent) -> ErrorDetails | None:
        self.saw_event = True
        if ev.data == _DONE:
            self.done = True
            return None
        if ev.event == "error":
            self.last_ts = ev.ts_ns
            return _stream_error_event(ev.data, self.status)
        try:
            obj = _loads(ev.data)
        except _BadBody as exc:
            return _invalid(f"Malformed SSE event: {exc}", self.status)
        self.last_ts = ev.ts_ns
        err = _embedded_error(obj, self.status)
        if err is not None:
            return err
        self.usage = _usage(obj) or self.usage
        content = _content(self.kind, obj, ev.ts_ns)
        if content is not None:
            self.responses.append(content)
        return None

    def result(self, error: ErrorDetails | None) -> ParsedResponse:
        return ParsedResponse(self.responses, self.usage, error, self.last_ts, streamed=True)


class FirstContent:
    """Watches a streamed answer, one read at a time, for its first content (what AIPerf counts
    as the first token: the first SSE event with text, as `parse_response` reads it).
    `feed` returns True once, for the read that completed that event, False before and after.
    Never raises on bad server output."""

    __slots__ = ("_kind", "_parser", "_found")

    def __init__(self, endpoint_type: EndpointType) -> None:
        self._kind = spec_of(endpoint_type)
        self._parser = SseParser()
        self._found = False

    def feed(self, data: bytes, ts_ns: int) -> bool:
        """Consume one read; True when it carried the first content."""
        if self._found:
            return False
        for ev in self._parser.feed(data, ts_ns):
            if ev.data == _DONE or ev.event == "error":
                continue
            try:
                obj = _loads(ev.data)
            except _BadBody:
                continue
            if _content(self._kind, obj, ts_ns) is not None:
                self._found = True
                return True
        return False


def _parse_stream(kind: EndpointSpec, record: RequestRecord) -> ParsedResponse:
    parser = SseParser()
    stream = _Stream(kind, record.status)
    for chunk, ts in zip(record.chunks, record.chunk_ns, strict=False):
        for ev in parser.feed(chunk, ts):
            if stream.done:
                break
            if (err := stream.take(ev)) is not None:
                return stream.result(err)
    if not stream.done:
        for ev in parser.finish():
            if (err := stream.take(ev)) is not None:
                return stream.result(err)
    if not stream.saw_event and any(record.chunks):
        # The server ignored "stream": true and answered with one JSON body.
        return _parse_body(kind, record)
    return stream.result(None)


def _stream_error_event(data: str, status: int) -> ErrorDetails:
    try:
        obj = _loads(data)
    except _BadBody:
        return ErrorDetails(type="StreamError", message=data[:_MAX_MESSAGE], code=status or None)
    return _embedded_error(obj, status) or ErrorDetails(
        type="StreamError", message=_error_message(obj)[:_MAX_MESSAGE], code=status or None)
