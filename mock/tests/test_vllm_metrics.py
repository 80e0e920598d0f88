"""The vLLM-style families of /metrics follow exactly from what the server answered."""

from __future__ import annotations

from collections.abc import Callable

import aiohttp
import anyio
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from aiperf.mock_server.testing import MockProcess

pytestmark = pytest.mark.anyio


async def _families(url: str) -> dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    async with aiohttp.ClientSession() as session, session.get(url + "/metrics") as r:
        text = await r.text()
    return {f.name: {(s.name, tuple(sorted(s.labels.items()))): s.value for s in f.samples}
            for f in text_string_to_metric_families(text)}


async def test_counters_and_histograms_match_what_was_served(start_mock: Callable[..., MockProcess]) -> None:
    server = start_mock("--ttft-ms", "30", "--itl-ms", "1", "--workers", "2", "--model", "m1")
    body = {"messages": [{"role": "user", "content": "one two three"}], "max_tokens": 5}
    model = (("model_name", "m1"),)

    async def one(stream: bool) -> None:
        async with aiohttp.ClientSession() as session, session.post(
                server.url + "/v1/chat/completions", data=orjson.dumps({**body, "stream": stream}),
                headers={"content-type": "application/json"}) as r:
            assert r.status == 200
            await r.read()

    async with anyio.create_task_group() as tg:
        for i in range(12):
            tg.start_soon(one, i % 2 == 0)
    fams = await _families(server.url)
    assert fams["vllm:generation_tokens"][("vllm:generation_tokens_total", model)] == 12 * 5
    assert fams["vllm:prompt_tokens"][("vllm:prompt_tokens_total", model)] == 12 * 3
    success = fams["vllm:request_success"]
    assert success[("vllm:request_success_total", (("finished_reason", "length"), *model))] == 12
    assert success[("vllm:request_success_total", (("finished_reason", "stop"), *model))] == 0
    ttft = fams["vllm:time_to_first_token_seconds"]
    assert ttft[("vllm:time_to_first_token_seconds_count", model)] == 12
    assert ttft[("vllm:time_to_first_token_seconds_sum", model)] == pytest.approx(12 * 0.030)
    buckets = {dict(labels)["le"]: v for (name, labels), v in ttft.items() if name.endswith("_bucket")}
    assert buckets["0.02"] == 0 and buckets["0.04"] == 12 and buckets["+Inf"] == 12
    e2e = fams["vllm:e2e_request_latency_seconds"]
    assert e2e[("vllm:e2e_request_latency_seconds_count", model)] == 12
    assert e2e[("vllm:e2e_request_latency_seconds_sum", model)] >= 12 * 0.034
    assert fams["vllm:num_requests_running"][("vllm:num_requests_running", model)] == 0
    assert fams["vllm:gpu_cache_usage_perc"][("vllm:gpu_cache_usage_perc", model)] == 0
