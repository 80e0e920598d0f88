"""Wire shapes of every endpoint, against a real server subprocess."""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Iterator

import aiohttp
import orjson
import pytest

from aiperf.mock_server.testing import MockProcess, running_mock, sse_json

pytestmark = pytest.mark.anyio

PROMPT = "one two three four five"


@pytest.fixture(scope="module")
def server() -> Iterator[MockProcess]:
    with running_mock("--embedding-dim", "16", "--model", "test-model", "--seed", "1") as s:
        yield s


async def _post(url: str, path: str, body: object) -> tuple[int, bytes, str]:
    async with aiohttp.ClientSession() as session:
        async with session.post(url + path, data=orjson.dumps(body),
                                headers={"content-type": "application/json"}) as r:
            return r.status, await r.read(), r.headers.get("content-type", "")


async def _get(url: str, path: str) -> tuple[int, bytes, str]:
    async with aiohttp.ClientSession() as session:
        async with session.get(url + path) as r:
            return r.status, await r.read(), r.headers.get("content-type", "")


async def test_chat_stream_shape_and_token_count(server: MockProcess) -> None:
    body = {"model": "any/model-name", "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": 7, "stream": True, "stream_options": {"include_usage": True}}
    status, raw, ctype = await _post(server.url, "/v1/chat/completions", body)
    assert status == 200 and ctype.startswith("text/event-stream")
    chunks, done = sse_json(raw)
    assert done == b"[DONE]"
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "any/model-name" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    content = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert len(content) == 7
    assert content[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"]["content"] for c in content)
    assert len(text.split()) == 7
    final = chunks[-1]
    assert final["choices"][0]["finish_reason"] == "length"
    assert final["usage"] == {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}


async def test_usage_is_in_final_chunk_even_without_include_usage(server: MockProcess) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "a b"}]}],
            "max_completion_tokens": 3, "max_tokens": 99, "stream": True}
    _, raw, _ = await _post(server.url, "/v1/chat/completions", body)
    chunks, _ = sse_json(raw)
    assert chunks[-1]["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}


async def test_completions_stream(server: MockProcess) -> None:
    body = {"model": "m", "prompt": PROMPT, "max_tokens": 5, "stream": True}
    status, raw, _ = await _post(server.url, "/v1/completions", body)
    assert status == 200
    chunks, done = sse_json(raw)
    assert done == b"[DONE]"
    assert all(c["object"] == "text_completion" for c in chunks)
    texts = [c["choices"][0]["text"] for c in chunks if c["choices"][0]["text"]]
    assert len(texts) == 5 and len("".join(texts).split()) == 5
    assert chunks[-1]["usage"]["completion_tokens"] == 5


async def test_non_streaming_chat_and_completions(server: MockProcess) -> None:
    status, raw, ctype = await _post(server.url, "/v1/chat/completions",
                                     {"model": "m", "messages": [{"role": "user", "content": PROMPT}],
                                      "max_tokens": 9})
    assert status == 200 and ctype.startswith("application/json")
    doc = orjson.loads(raw)
    assert doc["object"] == "chat.completion"
    assert doc["choices"][0]["message"]["role"] == "assistant"
    assert len(doc["choices"][0]["message"]["content"].split()) == 9
    assert doc["usage"] == {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}

    status, raw, _ = await _post(server.url, "/v1/completions", {"model": "m", "prompt": ["a b", "c"]})
    doc = orjson.loads(raw)
    assert doc["object"] == "text_completion"
    assert doc["usage"]["prompt_tokens"] == 3
    assert doc["usage"]["completion_tokens"] == 64 == len(doc["choices"][0]["text"].split())
    assert doc["choices"][0]["finish_reason"] == "stop"


async def test_embeddings_shape(server: MockProcess) -> None:
    status, raw, _ = await _post(server.url, "/v1/embeddings", {"model": "e", "input": ["hello world", "x"]})
    assert status == 200
    doc = orjson.loads(raw)
    assert doc["object"] == "list" and doc["model"] == "e"
    assert [d["index"] for d in doc["data"]] == [0, 1]
    for item in doc["data"]:
        assert item["object"] == "embedding" and len(item["embedding"]) == 16
        assert math.isclose(math.sqrt(sum(x * x for x in item["embedding"])), 1.0, abs_tol=1e-4)
    assert doc["usage"] == {"prompt_tokens": 3, "total_tokens": 3}

    _, raw, _ = await _post(server.url, "/v1/embeddings",
                            {"model": "e", "input": "hello world", "encoding_format": "base64"})
    packed = base64.b64decode(orjson.loads(raw)["data"][0]["embedding"])
    vec = struct.unpack("<16f", packed)
    assert vec == pytest.approx(doc["data"][0]["embedding"], abs=1e-6)


async def test_models_lists_served_model(server: MockProcess) -> None:
    status, raw, _ = await _get(server.url, "/v1/models")
    assert status == 200
    doc = orjson.loads(raw)
    assert doc["object"] == "list"
    assert [m["id"] for m in doc["data"]] == ["test-model"]


@pytest.mark.parametrize(("path", "body", "status"), [
    ("/v1/chat/completions", b"{not json", 400),
    ("/v1/chat/completions", b"[1, 2]", 400),
    ("/v1/chat/completions", b'{"model": "m"}', 400),
    ("/v1/chat/completions", b'{"messages": [], "max_tokens": -1}', 400),
    ("/v1/completions", b'{"prompt": "x", "max_tokens": "ten"}', 400),
    ("/v1/embeddings", b'{"input": []}', 400),
    ("/v1/nope", b"{}", 404),
    ("/v1/models", b"{}", 405),
])
async def test_client_mistakes_get_4xx_json(server: MockProcess, path: str, body: bytes, status: int) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.post(server.url + path, data=body) as r:
            assert r.status == status
            error = orjson.loads(await r.read())["error"]
    assert error["message"] and error["type"]


async def test_metrics_and_stats(server: MockProcess) -> None:
    before = orjson.loads((await _get(server.url, "/stats"))[1])
    await _post(server.url, "/v1/chat/completions", {"messages": [], "max_tokens": 4, "stream": True})
    after = orjson.loads((await _get(server.url, "/stats"))[1])
    assert after["requests"] == before["requests"] + 1
    assert after["output_tokens"] == before["output_tokens"] + 4
    assert after["in_flight"] == 0 and after["workers"] == 1

    status, raw, ctype = await _get(server.url, "/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    samples = {}
    for line in raw.decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    assert samples['mock_requests_total{endpoint="/v1/chat/completions",status="200"}'] >= 1
    assert samples["mock_injected_errors_total"] == 0
    assert samples["mock_requests_in_flight"] == 0
    assert samples["mock_output_tokens_total"] == after["output_tokens"]
    assert "# TYPE mock_requests_in_flight gauge" in raw.decode()
