"""Injected errors: HTTP 500 with an OpenAI-style body, counted exactly in /stats and /metrics."""

from __future__ import annotations

from collections.abc import Callable

import aiohttp
import anyio
import orjson
import pytest

from aiperf.mock_server.testing import MockProcess

pytestmark = pytest.mark.anyio

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


async def _statuses(url: str, n: int, *, concurrency: int = 1, stream: bool = False) -> list[int]:
    statuses: list[int] = []
    body = orjson.dumps({**CHAT, "stream": stream})
    async with aiohttp.ClientSession() as session:
        async def one() -> None:
            async with session.post(url + "/v1/chat/completions", data=body) as r:
                raw = await r.read()
                if r.status == 500:
                    error = orjson.loads(raw)["error"]
                    assert error["type"] == "server_error" and error["code"] == "mock_injected_error"
                statuses.append(r.status)

        if concurrency == 1:
            for _ in range(n):
                await one()
        else:
            limiter = anyio.Semaphore(concurrency)

            async def limited() -> None:
                async with limiter:
                    await one()

            async with anyio.create_task_group() as tg:
                for _ in range(n):
                    tg.start_soon(limited)
    return statuses


async def _stats(url: str) -> dict[str, object]:
    async with aiohttp.ClientSession() as session:
        async with session.get(url + "/stats") as r:
            doc: dict[str, object] = orjson.loads(await r.read())
            return doc


async def _metric(url: str, name: str) -> float:
    async with aiohttp.ClientSession() as session:
        async with session.get(url + "/metrics") as r:
            for line in (await r.text()).splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
    raise AssertionError(f"{name} missing from /metrics")


async def test_error_rate_one_fails_every_request_across_workers(
        start_mock: Callable[..., MockProcess]) -> None:
    server = start_mock("--error-rate", "1.0", "--workers", "2")
    statuses = await _statuses(server.url, 40, concurrency=8)
    assert statuses == [500] * 40
    stats = await _stats(server.url)
    assert stats["errors"] == 40 and stats["requests"] == 40 and stats["workers"] == 2
    assert stats["requests_by_endpoint"]["/v1/chat/completions"] == {"500": 40}  # type: ignore[index]
    assert await _metric(server.url, "mock_injected_errors_total") == 40


async def test_seeded_error_rate_matches_stats_and_repeats(start_mock: Callable[..., MockProcess]) -> None:
    first = start_mock("--error-rate", "0.3", "--seed", "7")
    seen = await _statuses(first.url, 100, stream=True)
    errors = seen.count(500)
    assert 10 < errors < 60, errors  # 0.3 of 100, with a wide margin
    stats = await _stats(first.url)
    assert stats["errors"] == errors and stats["requests"] == 100
    assert await _metric(first.url, "mock_injected_errors_total") == errors

    again = start_mock("--error-rate", "0.3", "--seed", "7")
    assert await _statuses(again.url, 100, stream=True) == seen
