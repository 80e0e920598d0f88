"""The ASGI app in-process with a fake clock: the deadline schedule and the message pattern."""

from __future__ import annotations

import random
from collections.abc import MutableMapping
from typing import Any

import anyio
import orjson
import pytest

from aiperf.mock_server.app import MockApp
from aiperf.mock_server.config import MockConfig
from aiperf.mock_server.stats import Counter, StatsBoard
from aiperf.mock_server.testing import sse_events
from aiperf.mock_server.tokens import VOCAB, count_chat, count_prompt, generated_text

pytestmark = pytest.mark.anyio


class FakeClock:
    """Time stands still unless slept; records every deadline asked for."""

    def __init__(self) -> None:
        self.t = 100.0
        self.deadlines: list[float] = []

    def now(self) -> float:
        return self.t

    async def sleep_until(self, deadline: float) -> None:
        self.deadlines.append(deadline)
        await anyio.sleep(0)  # let other tasks (the disconnect watcher) run, as a real sleep would
        self.t = max(self.t, deadline) + 0.0007  # every wake is late; deadlines must not drift


async def _call(app: MockApp, path: str, body: dict[str, Any], *,
                hang_up: bool = False) -> list[dict[str, Any]]:
    """Run one request; with ``hang_up`` the client disconnects right after sending its body."""
    sent: list[dict[str, Any]] = []
    inbox = [{"type": "http.request", "body": orjson.dumps(body), "more_body": False}]

    async def receive() -> dict[str, Any]:
        if inbox:
            return inbox.pop(0)
        if not hang_up:
            await anyio.Event().wait()  # a connected client: nothing more until cancelled
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    await app({"type": "http", "method": "POST", "path": path}, receive, send)
    return sent


def _app(clock: FakeClock, **overrides: Any) -> tuple[MockApp, StatsBoard]:
    stats = StatsBoard.private()
    config = MockConfig(**overrides)
    return MockApp(config=config, stats=stats, rng=random.Random(3), clock=clock), stats


async def test_deadlines_are_absolute() -> None:
    clock = FakeClock()
    app, stats = _app(clock, ttft_ms=40, itl_ms=8)
    messages = await _call(app, "/v1/chat/completions", {"messages": [], "max_tokens": 32, "stream": True})
    expected = [100.0 + 0.040 + k * 0.008 for k in range(32)]
    assert clock.deadlines == pytest.approx(expected, abs=1e-9)
    bodies = [m for m in messages if m["type"] == "http.response.body"]
    assert len(bodies) == 32 + 2  # one message per token, the usage chunk, [DONE]
    assert all(m["more_body"] for m in bodies[:-1]) and not bodies[-1]["more_body"]
    assert all(len(sse_events(m["body"])) == 1 for m in bodies)
    assert stats.total(Counter.OUTPUT_TOKENS) == 32 and stats.total(Counter.COMPLETED) == 1


async def test_jitter_stays_within_bounds_and_never_negative() -> None:
    clock = FakeClock()
    app, _ = _app(clock, ttft_ms=1, itl_ms=2, jitter_ms=3, seed=5)
    await _call(app, "/v1/completions", {"prompt": "x", "max_tokens": 200, "stream": True})
    d = clock.deadlines
    assert 0 <= d[0] - 100.0 <= 0.004 + 1e-12
    gaps = [b - a for a, b in zip(d, d[1:], strict=False)]
    assert all(0 <= g <= 0.005 + 1e-12 for g in gaps)
    assert any(g == 0 for g in gaps) and len(set(gaps)) > 50  # clamped at 0 sometimes, random otherwise


async def test_non_stream_waits_for_last_token_deadline() -> None:
    clock = FakeClock()
    app, _ = _app(clock, ttft_ms=30, itl_ms=5)
    messages = await _call(app, "/v1/chat/completions", {"messages": [], "max_tokens": 9})
    assert clock.deadlines == [pytest.approx(100.0 + 0.030 + 8 * 0.005)]
    assert len(orjson.loads(messages[-1]["body"])["choices"][0]["message"]["content"].split()) == 9


async def test_fixed_output_tokens_override_the_request() -> None:
    app, _ = _app(FakeClock(), output_tokens=5)
    messages = await _call(app, "/v1/completions", {"prompt": "x", "max_tokens": 50})
    doc = orjson.loads(messages[-1]["body"])
    assert doc["usage"]["completion_tokens"] == 5 and doc["choices"][0]["finish_reason"] == "stop"


async def test_min_tokens_raises_the_default_length() -> None:
    app, _ = _app(FakeClock(), default_output_tokens=4)
    messages = await _call(app, "/v1/completions", {"prompt": "x", "min_tokens": 10, "ignore_eos": True})
    assert orjson.loads(messages[-1]["body"])["usage"]["completion_tokens"] == 10


async def test_disconnect_stops_a_stream() -> None:
    clock = FakeClock()
    app, stats = _app(clock, itl_ms=5)
    # receive() reports the disconnect right after the body: the stream stops at its next token.
    messages = await _call(app, "/v1/chat/completions", {"messages": [], "max_tokens": 100, "stream": True},
                           hang_up=True)
    assert len([m for m in messages if m["type"] == "http.response.body"]) < 100
    assert stats.total(Counter.DISCONNECTS) == 1 and stats.total(Counter.COMPLETED) == 0


def test_token_text_and_prompt_counts() -> None:
    assert generated_text(len(VOCAB) + 2) == "".join(VOCAB) + VOCAB[0] + VOCAB[1]
    assert all(w.startswith(" ") and len(w.split()) == 1 for w in VOCAB)
    assert count_prompt("a  b\nc") == 3 and count_prompt([4, 5]) == 2
    assert count_prompt([[1, 2, 3], "x y"]) == 5
    parts = [{"type": "text", "text": "c"}, {"type": "image_url"}]
    assert count_chat([{"role": "user", "content": "a b"}, {"role": "user", "content": parts}]) == 3


def test_long_prompts_count_like_split_without_splitting() -> None:
    # The Latin-1 fast path (a 1M-token context) and the split fallback (wider characters) agree
    # with str.split on every whitespace str.split knows, ASCII and not.
    import random

    from aiperf.mock_server.tokens import count_words

    rnd = random.Random(7)
    for alphabet in (" \t\n\x0b\x0c\r\x1c\x1f\x85\xa0ab.\xe9", " \t\n\x85\xa0ab\u3000\u2003\u5b57", "ab "):
        for _ in range(50):
            text = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(4000, 6000)))
            assert count_words(text) == len(text.split())
    assert count_words("x" * 5000) == 1 and count_words(" " * 5000) == 0
