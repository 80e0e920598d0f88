"""Misbehaving servers on demand (`--fault KIND`), for the client's fault tests: each kind
answers a streaming or non-streaming inference request the way a broken server would.

- `reset`: headers and two events, then the connection is dropped mid-body;
- `hang-headers`: never sends the headers;
- `hang-stream`: headers and two events, then nothing more;
- `trickle`: a normal stream sent one byte at a time, `trickle_ms` apart;
- `endless`: events of `FILLER` text as fast as the client reads them, never a `[DONE]`;
- `malformed-sse`: events whose data is not JSON, then `[DONE]`;
- `invalid-utf8`: an event with bytes that are not UTF-8, then `[DONE]`;
- `huge-event`: one 8 MiB event (of words), then `[DONE]`;
- `huge-word`: one 8 MiB event whose text is a single word of random letters, then `[DONE]`.

"Never" means until the client goes away or `HANG_S` passes (the server stays stoppable).
"""

from __future__ import annotations

import asyncio
import enum
import functools
import random
import string
from typing import Any

HANG_S = 3600.0
HUGE_EVENT_BYTES = 8 << 20
FILLER = b"x" * 16384
_EVENT = b'data: {"id":"f","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
_DONE = b"data: [DONE]\n\n"


class Fault(enum.StrEnum):
    RESET = "reset"
    HANG_HEADERS = "hang-headers"
    HANG_STREAM = "hang-stream"
    TRICKLE = "trickle"
    ENDLESS = "endless"
    MALFORMED_SSE = "malformed-sse"
    INVALID_UTF8 = "invalid-utf8"
    HUGE_EVENT = "huge-event"
    HUGE_WORD = "huge-word"


@functools.cache
def _huge_word() -> bytes:
    """`HUGE_EVENT_BYTES` of pseudo-random ASCII letters: one word that BPE cannot merge into
    few tokens (a repeated pattern would merge cheaply), the same on every call."""
    table = bytes(ord(string.ascii_letters[i % len(string.ascii_letters)]) for i in range(256))
    return random.Random(0).randbytes(HUGE_EVENT_BYTES).translate(table)  # fast: no idle gap after the headers



class DropConnection(Exception):
    """Raised out of the ASGI app after the response started: the server aborts the connection
    (the body is cut short, as when a server crashes mid-stream)."""


async def serve_fault(fault: Fault, send: Any, headers: list[tuple[bytes, bytes]], *, trickle_ms: float) -> None:
    """Answer one inference request with `fault` through the ASGI `send`."""
    if fault is Fault.HANG_HEADERS:
        await asyncio.sleep(HANG_S)
        return
    await send({"type": "http.response.start", "status": 200, "headers": headers})

    async def body(data: bytes, more: bool = True) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": more})

    match fault:
        case Fault.RESET:
            await body(_EVENT + _EVENT)
            raise DropConnection("mock --fault reset")
        case Fault.HANG_STREAM:
            await body(_EVENT + _EVENT)
            await asyncio.sleep(HANG_S)
        case Fault.TRICKLE:
            for i in range(len(_EVENT) * 4):
                await body((_EVENT * 4)[i:i + 1])
                await asyncio.sleep(trickle_ms / 1000)
        case Fault.ENDLESS:
            chunk = b'data: {"choices":[{"index":0,"delta":{"content":"' + FILLER + b'"}}]}\n\n'
            loop = asyncio.get_running_loop()
            deadline = loop.time() + HANG_S
            while loop.time() < deadline:
                await body(chunk)
                await asyncio.sleep(0)
        case Fault.MALFORMED_SSE:
            await body(b"data: {not json\n\n" + b"data: {\"choices\": [\n\n" + b"event without data\n\n")
        case Fault.INVALID_UTF8:
            await body(b'data: {"choices":[{"index":0,"delta":{"content":"\xff\xfe\xc3"}}]}\n\n')
        case Fault.HUGE_EVENT:
            text = b"word " * (HUGE_EVENT_BYTES // 5)
            await body(b'data: {"choices":[{"index":0,"delta":{"content":"' + text + b'"}}]}\n\n')
        case Fault.HUGE_WORD:
            text = _huge_word()
            await body(b'data: {"choices":[{"index":0,"delta":{"content":"' + text + b'"}}]}\n\n')
    await body(_DONE, more=False)


__all__ = ["Fault", "DropConnection", "serve_fault", "HANG_S"]
