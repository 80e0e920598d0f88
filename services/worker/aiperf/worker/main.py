"""Entry point of the worker process: `python -m aiperf.worker.main --help`."""

from __future__ import annotations

import functools
import gc
import json
import os
import sys
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any

import structlog

from aiperf.comms import (
    CONTROLLER_HOST_ENV,
    RAW_RECORDS_HWM,
    Addressing,
    Channel,
    DealerSocket,
    PushSocket,
    probe_return_channel,
)
from aiperf.config import HttpOptions, RunConfig
from aiperf.messages import CreditChannel, ServiceType
from aiperf.runtime import Service, ServiceContext, UserError, service_main
from aiperf.runtime.limits import WORKER_HINT, connections_per_worker, ensure_open_files
from aiperf.worker.exchange import Transport
from aiperf.worker.h1 import H1Transport
from aiperf.worker.service import Worker, WorkerSettings

log = structlog.get_logger("aiperf.worker")

API_KEY_ENV = "AIPERF_API_KEY"
HEADERS_ENV = "AIPERF_HEADERS_JSON"
HTTP_CLIENT_ENV = "AIPERF_HTTP_CLIENT"
"""`h1` (default: `aiperf.worker.h1`, asyncio protocol + httptools) or `aiohttp` (the previous
client, kept for comparison)."""


def raw_records_endpoint(addressing: Addressing, group_id: str, index: int) -> str:
    """IPC endpoint of record-processor `record-processor-<group_id>-<index>` (it binds it)."""
    label: Any = f"{group_id}-{index}"  # Addressing.ipc formats any index (annotated int)
    return addressing.ipc(Channel.RAW_RECORDS, index=label)


def credit_endpoints(config: RunConfig, addressing: Addressing, group_id: str) -> tuple[str, str]:
    """Where the worker's `credits` DEALER and `credit_returns` PUSH connect: to the
    timing-manager (the controller) with central issuing; with `runtime.issuing: per_pod` to its
    own group's worker-group-manager, over the pod-local IPC endpoints (`Addressing.pod_local`)."""
    if config.benchmark.runtime.issuing == "per_pod":
        return (addressing.pod_local(Channel.CREDITS, group_id),
                addressing.pod_local(Channel.CREDIT_RETURNS, group_id))
    return addressing.connect_endpoint(Channel.CREDITS), addressing.connect_endpoint(Channel.CREDIT_RETURNS)


def request_headers(env: Mapping[str, str]) -> dict[str, str]:
    """Headers every request carries besides Content-Type: `Authorization: Bearer` from
    AIPERF_API_KEY, then the JSON object of AIPERF_HEADERS_JSON (which may override it).
    Raises `UserError` when AIPERF_HEADERS_JSON is not a JSON object of strings."""
    headers: dict[str, str] = {}
    if key := env.get(API_KEY_ENV):
        headers["Authorization"] = f"Bearer {key}"
    if raw := env.get(HEADERS_ENV):
        try:
            extra = json.loads(raw)
        except ValueError as exc:
            raise UserError(f"{HEADERS_ENV}: not valid JSON ({exc}); pass --header NAME:VALUE") from None
        if not isinstance(extra, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in extra.items()):
            raise UserError(f"{HEADERS_ENV}: must be a JSON object of string names and values")
        headers.update(extra)
    return headers


async def build(ctx: ServiceContext, stack: AsyncExitStack) -> Service:
    """Wire the worker: DEALER on `credits` (identity = service id), PUSH (IMMEDIATE) on
    `credit_returns` (where: `credit_endpoints`), PUSH on `raw_records` to every record-processor of its group (round
    robin; `RAW_RECORDS_HWM`: a push waits once a record-processor is that far behind), and one pooled HTTP client (AIPERF_HTTP_CLIENT). Everything closes with `stack`."""
    config, addressing, group = ctx.config, ctx.addressing, ctx.group_id
    headers = request_headers(os.environ)
    ensure_open_files(connections_per_worker(config), hint=WORKER_HINT)
    credits_at, returns_at = credit_endpoints(config, addressing, group)
    credits = await stack.enter_async_context(DealerSocket[CreditChannel](
        ctx.zmq, identity=ctx.service_id, decode=CreditChannel, channel="credits", connect=[credits_at]))
    returns = await stack.enter_async_context(PushSocket(
        ctx.zmq, channel="credit_returns", immediate=True, connect=[returns_at]))
    processors = [raw_records_endpoint(addressing, group, j)
                  for j in range(config.services.record_processors_per_group)]
    records = await stack.enter_async_context(PushSocket(
        ctx.zmq, channel="raw_records", connect=processors, hwm=RAW_RECORDS_HWM))
    transport = await _transport(stack, config.http, os.environ.get(HTTP_CLIENT_ENV, "h1"))
    settings = WorkerSettings(worker_id=ctx.service_id, group_id=group, headers=headers,
                              measure_clock_offset=bool(os.environ.get(CONTROLLER_HOST_ENV)),
                              handshake_timeout_s=config.runtime.registration_timeout_s)
    worker = Worker(settings=settings, endpoint=config.benchmark.endpoint, model=config.benchmark.model,
                    credits=credits, returns=returns,
                    records=records, transport=transport,
                    probe=functools.partial(probe_return_channel, returns, log=log))
    stack.callback(worker.close)
    return worker


async def _build_frozen(ctx: ServiceContext, stack: AsyncExitStack) -> Service:
    """`build`, then what start-up left (the zygote's modules included) goes to the permanent
    generation: a full collection over it stalls the loop for tens of ms mid-run, and every read
    waiting meanwhile is stamped late. Only in the worker's own process (never in a test's)."""
    worker = await build(ctx, stack)
    gc.freeze()
    return worker


async def _transport(stack: AsyncExitStack, limits: HttpOptions, kind: str) -> Transport:
    """The HTTP client named by AIPERF_HTTP_CLIENT, closed with `stack`."""
    if kind == "h1":
        return await stack.enter_async_context(H1Transport(limits))
    if kind == "aiohttp":
        from aiperf.worker.http import AiohttpTransport, new_session  # aiohttp only when asked for

        session = await stack.enter_async_context(new_session())
        return AiohttpTransport(session, limits)
    raise UserError(f"{HTTP_CLIENT_ENV}={kind!r}: use h1 or aiohttp")


def main(argv: list[str] | None = None) -> int:
    """Run one worker process; see `--help`."""
    return service_main(ServiceType.WORKER, _build_frozen, argv)


if __name__ == "__main__":
    sys.exit(main())
