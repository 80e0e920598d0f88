"""Drives a benchmark through the services, following docs/run-protocol.md."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import structlog

from aiperf.config import RunConfig
from aiperf.messages import (
    ProfileCancel,
    ProfileConfigure,
    ProfileStart,
    ServiceCommand,
    ServiceType,
    SystemState,
)
from aiperf.runtime.control_server import ControlServer

log = structlog.get_logger("aiperf.system_controller.profile")

DATASET_TIMEOUT_S = 600.0
FINALIZE_TIMEOUT_S = 120.0


@dataclass(kw_only=True)
class ProfileOutcome:
    """What the run produced, for the CLI to print."""

    accounting: dict[str, Any] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)
    lost_workers: list[str] = field(default_factory=list)


class ProfileDriver:
    """configure (dataset first, then everyone) -> ready -> profiling (timing-manager) ->
    processing/exporting (records-manager `finalize`). Cancellation (Ctrl+C) sends
    `ProfileCancel` and still finalizes, so partial results are written."""

    def __init__(self, *, config: RunConfig, on_started: Callable[[], Awaitable[None]] | None = None) -> None:
        self._config = config
        self._on_started = on_started
        self.outcome = ProfileOutcome()
        self._control: ControlServer | None = None
        self._profiling = False

    def _ids(self, control: ControlServer, service_type: ServiceType) -> list[str]:
        return sorted(sid for sid, info in control.services.items()
                      if info.service_type is service_type and sid not in self.outcome.lost_workers)

    async def drive(self, control: ControlServer, set_state: Callable[[SystemState], Awaitable[None]],
                    cancelled: anyio.Event) -> SystemState:
        self._control = control
        timeout = self._config.runtime.command_timeout_s
        (dataset_manager,) = self._ids(control, ServiceType.DATASET_MANAGER)
        reply = await control.ask(dataset_manager, ProfileConfigure(
            request_id=control.new_request_id("configure")), timeout=DATASET_TIMEOUT_S)
        options = {"dataset_dir": reply.result["dataset_dir"]}
        others = [sid for sid in control.services if sid != dataset_manager]
        replies = await control.ask_all(
            others, lambda rid: ProfileConfigure(request_id=rid, options=options),
            timeout=max(timeout, self._config.runtime.registration_timeout_s + 5))
        for reply_or_error in replies.values():
            if isinstance(reply_or_error, Exception):
                raise reply_or_error
        await set_state(SystemState.READY)
        if cancelled.is_set():
            return SystemState.CANCELLED
        (timing_manager,) = self._ids(control, ServiceType.TIMING_MANAGER)
        await set_state(SystemState.PROFILING)
        if self._on_started is not None:
            await self._on_started()
        self._profiling = True
        async with anyio.create_task_group() as tg:

            async def cancel_on_request() -> None:
                await cancelled.wait()
                log.warning("profile.cancelling")
                await control.ask(timing_manager, ProfileCancel(
                    request_id=control.new_request_id("cancel"), reason="cancelled by user"),
                    timeout=timeout)

            tg.start_soon(cancel_on_request)
            start = await control.ask(timing_manager, ProfileStart(
                request_id=control.new_request_id("start")), timeout=float("inf"))
            tg.cancel_scope.cancel()
        self._profiling = False
        self.outcome.accounting = start.result
        await set_state(SystemState.PROCESSING)
        (records_manager,) = self._ids(control, ServiceType.RECORDS_MANAGER)
        was_cancelled = cancelled.is_set() or bool(start.result.get("cancelled"))
        await set_state(SystemState.EXPORTING)
        final = await control.ask(records_manager, ServiceCommand(
            request_id=control.new_request_id("finalize"), name="finalize",
            args={"accounting": start.result, "was_cancelled": was_cancelled}),
            timeout=FINALIZE_TIMEOUT_S)
        self.outcome.results = final.result
        return SystemState.CANCELLED if was_cancelled else SystemState.DONE

    async def worker_lost(self, service_id: str, why: str) -> bool:
        """A worker died mid-run: its in-flight credits are declared lost at the
        timing-manager and the run goes on. False when the run cannot absorb it (not
        profiling), so the controller fails the run instead."""
        control = self._control
        if control is None or not self._profiling:
            return False
        self.outcome.lost_workers.append(service_id)
        (timing_manager,) = self._ids(control, ServiceType.TIMING_MANAGER)
        reply = await control.ask(timing_manager, ServiceCommand(
            request_id=control.new_request_id("lost"), name="worker_lost",
            args={"worker_id": service_id}), timeout=self._config.runtime.command_timeout_s)
        log.warning("profile.worker_lost", worker=service_id, why=why, lost=reply.result.get("lost"))
        return True
