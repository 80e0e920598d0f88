"""A worker wired by `main.build` on real ZMQ sockets (IPC) against real HTTP servers: a tiny
in-test server with known behaviours, and the bundled mock LLM server as a subprocess."""

from __future__ import annotations

import time

import anyio
import pytest
import zmq.asyncio

# The mock runs as a subprocess (`python -m aiperf.mock_server.main`, its app named by string):
# importing both makes Pants ship their code into this test's sandbox.
import aiperf.mock_server.app  # noqa: F401
import aiperf.mock_server.main  # noqa: F401
from aiperf.endpoints import EndpointType, parse_response
from aiperf.messages import CancelCredits, FirstToken, Phase, WorkerLeaving
from aiperf.mock_server.testing import MockProcess
from tests._worker_net import PIECES, LlmServer, free_port, real_worker

pytestmark = pytest.mark.anyio


async def test_streams_errors_drops_and_cancels_without_crashing(
        zctx: zmq.asyncio.Context, ipc_dir: str, dataset_dir: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIPERF_API_KEY", "sk-test")
    monkeypatch.setenv("AIPERF_HEADERS_JSON", '{"X-Tenant": "t1"}')
    async with LlmServer() as server, real_worker(zctx, ipc_dir, dataset_dir, url=server.url) as tm:
        got = await tm.exchange([
            (0, "stream", {}), (1, "error500", {}), (2, "drop", {}),
            (3, "hang", {"should_cancel": True, "cancel_after_ns": 30_000_000}),
            (4, "stream", {"scheduled_at_ns": time.perf_counter_ns() + 50_000_000}),
        ])
        rec, ret = got[0]
        assert ret.ok and ret.sent and rec.status == 200 and rec.error is None
        assert rec.start_ns <= rec.response_headers_ns <= rec.chunk_ns[0]
        assert rec.chunk_ns == sorted(rec.chunk_ns) and rec.chunk_ns[-1] <= rec.end_ns
        assert rec.start_wall_ns > 0 and rec.credit_received_ns <= rec.start_ns
        assert parse_response(EndpointType.CHAT, True, rec).text == "".join(PIECES)
        # requests 0-3 go out concurrently, so find this one by its request id
        (headers, body), = (r for r in server.requests if r[0]["X-Request-ID"] == rec.x_request_id)
        assert headers["Authorization"] == "Bearer sk-test" and headers["X-Tenant"] == "t1"
        assert body["stream"] is True and body["max_completion_tokens"] == 3

        rec, ret = got[1]
        assert not ret.ok and ret.sent and ret.error == "HTTP 500"
        assert rec.status == 500 and rec.error is None and b"boom" in b"".join(rec.chunks)

        rec, ret = got[2]
        assert not ret.ok and ret.sent and rec.error is not None
        assert rec.error.type == "ClientPayloadError" and rec.chunks  # got the first event

        rec, ret = got[3]
        assert ret.cancelled and ret.sent and rec.cancelled
        assert rec.error is not None and rec.error.type == "RequestCancellationError" and rec.error.code == 499

        rec, ret = got[4]
        assert ret.ok and rec.start_ns >= rec.scheduled_ns > 0

        # CancelCredits aborts what is in flight for that phase
        await tm.credit(5, "hang", phase=Phase.WARMUP)
        with anyio.fail_after(10):
            await server.hanging.wait()
        await tm.send(CancelCredits(phase=Phase.WARMUP, reason="benchmark cancelled"))
        ret = await tm.next_return()
        rec = await tm.next_record()
        assert ret.num == rec.credit_num == 5 and ret.cancelled and ret.sent and rec.cancelled

        # and the worker still works
        rec, ret = (await tm.exchange([(6, "stream", {})]))[6]
        assert ret.ok


async def test_multi_turn_conversation_over_http(zctx: zmq.asyncio.Context, ipc_dir: str,
                                                 dataset_dir: str) -> None:
    async with LlmServer() as server, real_worker(zctx, ipc_dir, dataset_dir, url=server.url) as tm:
        for turn in range(3):
            (rec, ret), = (await tm.exchange([(turn, "multi", {"turn_index": turn})])).values()
            assert ret.ok and rec.turn_index == turn and rec.input_tokens == turn + 1
        messages = [body["messages"] for _, body in server.requests]
        assert [len(m) for m in messages] == [1, 3, 5]
        assert messages[2][1] == {"role": "assistant", "content": "".join(PIECES)}


async def test_timeout_is_recorded(zctx: zmq.asyncio.Context, ipc_dir: str, dataset_dir: str) -> None:
    async with LlmServer() as server, real_worker(zctx, ipc_dir, dataset_dir, url=server.url,
                                                  timeout=0.2) as tm:
        (rec, ret), = (await tm.exchange([(0, "hang", {})])).values()
        assert not ret.ok and not ret.cancelled and ret.sent and ret.error == "RequestTimeout"
        assert rec.error is not None and rec.error.type == "RequestTimeout"
        # the timeout runs from before the connect; the request's clock from its first packet
        assert rec.end_ns - rec.credit_received_ns >= 200_000_000 and rec.start_ns > rec.credit_received_ns


async def test_connection_refused_is_recorded(zctx: zmq.asyncio.Context, ipc_dir: str,
                                              dataset_dir: str) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nobody listens there
    async with real_worker(zctx, ipc_dir, dataset_dir, url=url) as tm:
        got = await tm.exchange([(0, "stream", {}), (1, "stream", {})])
        for rec, ret in got.values():
            assert not ret.ok and ret.error == "ConnectionError" and ret.sent
            assert rec.error is not None and url in rec.error.message and rec.status == 0


async def test_non_streaming_body_is_one_chunk(zctx: zmq.asyncio.Context, ipc_dir: str,
                                               dataset_dir: str) -> None:
    async with LlmServer() as server, real_worker(zctx, ipc_dir, dataset_dir, url=server.url,
                                                  streaming=False) as tm:
        (rec, ret), = (await tm.exchange([(0, "stream", {})])).values()
        assert ret.ok and len(rec.chunks) == 1 and rec.chunk_ns == [rec.chunk_ns[0]]
        assert parse_response(EndpointType.CHAT, False, rec).text == "".join(PIECES)
        assert not rec.streaming and server.requests[0][1]["stream"] is False


async def test_stopping_returns_in_flight_credits_then_leaves(
        zctx: zmq.asyncio.Context, ipc_dir: str, dataset_dir: str) -> None:
    async with LlmServer() as server, real_worker(zctx, ipc_dir, dataset_dir, url=server.url) as tm:
        await tm.credit(0, "hang")
        with anyio.fail_after(10):
            await server.hanging.wait()
        await tm.stop_worker()
        ret = await tm.next_return()
        rec = await tm.next_record()
        assert ret.num == rec.credit_num == 0 and ret.cancelled and ret.sent and rec.cancelled
        with anyio.fail_after(10):
            assert await tm.returns.recv() == WorkerLeaving(worker_id="worker-g0-0")


async def test_against_the_bundled_mock_server(zctx: zmq.asyncio.Context, ipc_dir: str,
                                               dataset_dir: str) -> None:
    server = await anyio.to_thread.run_sync(
        lambda: MockProcess("--ttft-ms", "20", "--itl-ms", "2", "--output-tokens", "16").start())
    try:
        async with real_worker(zctx, ipc_dir, dataset_dir, url=server.url) as tm:
            got = await tm.exchange([(n, "stream", {}) for n in range(20)])
        for rec, ret in got.values():
            assert ret.ok and rec.status == 200
            parsed = parse_response(EndpointType.CHAT, True, rec)
            assert parsed.ok and len(parsed.responses) >= 2
            assert rec.chunk_ns[0] - rec.start_ns >= 20_000_000  # the server's TTFT at least
    finally:
        await anyio.to_thread.run_sync(server.stop)


@pytest.mark.parametrize("client", ["h1", "aiohttp"])
async def test_a_credit_holding_a_prefill_slot_reports_its_first_token_before_its_return(
        client: str, zctx: zmq.asyncio.Context, ipc_dir: str, dataset_dir: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIPERF_HTTP_CLIENT", client)
    async with LlmServer() as server, real_worker(zctx, ipc_dir, dataset_dir, url=server.url) as tm:
        await tm.credit(0, "stream", report_first_token=True)
        with anyio.fail_after(10):
            first = await tm.returns.recv()
        assert isinstance(first, FirstToken) and (first.worker_id, first.phase, first.num) == \
            ("worker-g0-0", Phase.PROFILING, 0)
        ret, rec = await tm.next_return(), await tm.next_record()
        assert ret.ok and first.at_ns == rec.chunk_ns[0]  # the read that carried "Hel"
        # no first token for one not asking, nor for an answer without content
        got = await tm.exchange([(1, "stream", {}), (2, "error500", {"report_first_token": True})])
        assert got[1][1].ok and not got[2][1].ok
        assert len(server.requests) == 3


async def test_a_credits_url_index_picks_the_server(zctx: zmq.asyncio.Context, ipc_dir: str, dataset_dir: str) -> None:
    async with LlmServer() as one, LlmServer() as two, \
            real_worker(zctx, ipc_dir, dataset_dir, url=one.url, urls=[one.url, two.url + "/v1"]) as tm:
        got = await tm.exchange([(0, "stream", {}), (1, "stream", {"url_index": 1}), (2, "stream", {"url_index": 0}),
                                 (3, "stream", {"url_index": 3})])  # past the end: wraps around
        assert all(ret.ok for _, ret in got.values())
        assert len(one.requests) == 2 and len(two.requests) == 2
