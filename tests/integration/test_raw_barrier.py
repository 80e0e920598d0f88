"""Kubernetes `--export-level raw`: the acknowledged finalize barrier across pods (issue 10, item 15).

Real pieces: the system-controller (`SystemController` + `ProfileDriver`, Kubernetes mode) and
its report (which writes the results-ready marker), the api's HTTP server on 127.0.0.1 with the
upload route, and two worker-group-managers (`WorkerGroupManager` + `RawUploader`, one per
simulated worker pod) uploading real part files from their pod's own folder. Fakes at our own
boundary only: the control ROUTER hands each command to an in-process handler, the
record-processors write their parts (staged, fsynced, renamed) when flushed, and the other
services answer as healthy ones do.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import msgspec
import pytest
from anyio.abc import TaskGroup

from aiperf.api.service import Api
from aiperf.comms import RAW_UPLOAD_TOKEN, CurveKeys
from aiperf.config import Artifacts, Benchmark, CommsOptions, RunConfig, RuntimeOptions, ServiceCounts
from aiperf.config.markers import READY_MARKER
from aiperf.messages import (
    Ack,
    BuildDataset,
    Command,
    CommandFailed,
    DatasetBuilt,
    Event,
    Finalize,
    Finalized,
    FlushRawRecords,
    GroupReady,
    Heartbeat,
    Phase,
    PhaseAccounting,
    PrepareGroup,
    ProfileFinished,
    ProfileStart,
    RawRecordsFlushed,
    Register,
    Reply,
    RunAccounting,
    ServiceState,
    SystemState,
    ToController,
    UploadRawRecords,
)
from aiperf.runtime.control_server import ControlServer
from aiperf.runtime.http import granian_server
from aiperf.system_controller.launcher import NoLauncher
from aiperf.system_controller.plan import plan_services
from aiperf.system_controller.profile_driver import ProfileDriver
from aiperf.system_controller.report import report
from aiperf.system_controller.service import SystemController, Verdict
from aiperf.worker_group_manager.download import RetryPolicy
from aiperf.worker_group_manager.service import WorkerGroupManager
from aiperf.worker_group_manager.upload import RawUploader

pytestmark = pytest.mark.anyio

COUNTS = ServiceCounts(worker_groups=2, workers_per_group=1, record_processors_per_group=2)
LINES = {"record-processor-g0-0": 30, "record-processor-g0-1": 0, "record-processor-g1-0": 20,
         "record-processor-g1-1": 7}
TOKEN = CurveKeys.generate().http_token(RAW_UPLOAD_TOKEN)
FAST = RetryPolicy(deadline_s=5.0, first_delay_s=0.01, max_delay_s=0.05)

Handler = Callable[[Command[Any]], Awaitable[Reply | None]]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Dispatch:
    """The control ROUTER stand-in: each command goes to its service's handler in a task of
    `tg`; the handler's reply (or its exception, as `CommandFailed`) comes back as the service's
    answer. A handler returning None never answers (a stalled pod)."""

    def __init__(self, tg: TaskGroup, handlers: dict[str, Handler]) -> None:
        self._tg, self._handlers = tg, handlers
        self._tx, self._rx = anyio.create_memory_object_stream[tuple[bytes, ToController]](1000)
        self.asked: dict[str, float] = {}

    async def recv(self) -> tuple[bytes, ToController]:
        return await self._rx.receive()

    async def send(self, peer: bytes, command: Command[Any]) -> None:
        self._tg.start_soon(self._answer, peer.decode(), command)

    async def _answer(self, sid: str, command: Command[Any]) -> None:
        self.asked.setdefault(type(command).__name__, time.monotonic())
        try:
            reply = await self._handlers.get(sid, _healthy)(command)
        except Exception as exc:  # the service's failure travels back as its answer
            reply = CommandFailed(error=str(exc), error_type=type(exc).__name__)
        if reply is not None:
            self.deliver(sid, msgspec.structs.replace(reply, request_id=command.request_id, service_id=sid))

    def deliver(self, sid: str, message: ToController) -> None:
        self._tx.send_nowait((sid.encode(), message))

    def register_everyone(self) -> None:
        for planned in plan_services(COUNTS):
            self.deliver(planned.service_id, Register(service_id=planned.service_id, pid=1,
                                                      service_type=planned.service_type, group_id=planned.group_id))
            self.deliver(planned.service_id, Heartbeat(service_id=planned.service_id, state=ServiceState.RUNNING))

    def close(self) -> None:
        self._tx.close()
        self._rx.close()


async def _healthy(command: Command[Any]) -> Reply:
    """What the controller pod's other services answer in a good run of `sum(LINES)` requests."""
    match command:
        case BuildDataset():
            return DatasetBuilt(dataset_dir="/aiperf/artifacts/dataset", conversations=3)
        case ProfileStart():
            n = sum(LINES.values())
            return ProfileFinished(accounting=RunAccounting(phases={Phase.PROFILING: PhaseAccounting(
                issued=n, returned=n, sent=n, ok=n)}))
        case Finalize():
            return Finalized(table="", accounting_line="ok", balanced=True, request_count=sum(LINES.values()))
    return Ack()


class RecordProcessor:
    """A record-processor of a worker pod: on `FlushRawRecords` it publishes its part in its
    pod's folder (staged, fsynced, renamed) and acknowledges size and lines; `grow` appends
    that many bytes after acknowledging (a part that is not what was acknowledged)."""

    def __init__(self, sid: str, pod_dir: Path, *, grow: int = 0) -> None:
        self.sid, self.pod_dir, self.grow = sid, pod_dir, grow

    def content(self) -> bytes:
        return b"".join(b'{"metadata": {"processor": "%s", "n": %d}, "responses": []}\n' % (self.sid.encode(), i)
                        for i in range(LINES[self.sid]))

    async def __call__(self, command: Command[Any]) -> Reply:
        if not isinstance(command, FlushRawRecords) or not LINES[self.sid]:
            return RawRecordsFlushed() if isinstance(command, FlushRawRecords) else Ack()
        final = self.pod_dir / "raw" / f"{self.sid}.jsonl"
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = final.with_name(f".{final.name}.partial")
        with open(staging, "wb") as out:
            out.write(self.content())
            out.flush()
            os.fsync(out.fileno())
        os.replace(staging, final)
        size = final.stat().st_size
        if self.grow:
            with open(final, "ab") as out:
                out.write(b"x" * self.grow)
        return RawRecordsFlushed(path=str(final), size=size, records=LINES[self.sid])


class NoEvents:
    """The api's event source in a run whose events do not matter here."""

    async def recv(self) -> Event:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


class Pods:
    """The controller's artifact folder, one folder per worker pod, and the run's config."""

    def __init__(self, tmp_path: Path) -> None:
        self.controller = tmp_path / "controller-pod"
        self.pods = {g: tmp_path / f"worker-pod-{g}" for g in ("g0", "g1")}
        self.config = RunConfig(
            run_id="raw", mode="profile", kubernetes=True, artifact_dir=str(self.controller),
            comms=CommsOptions(ipc_dir=str(tmp_path / "ipc")), services=COUNTS,
            benchmark=Benchmark(models=["m"], artifacts=Artifacts(export_level="raw")),
            runtime=RuntimeOptions(command_timeout_s=5, registration_timeout_s=5, heartbeat_timeout_s=60))
        self.controller.mkdir()

    def processors(self, grow: dict[str, int] | None = None) -> dict[str, RecordProcessor]:
        return {sid: RecordProcessor(sid, self.pods[sid.split("-")[2]], grow=(grow or {}).get(sid, 0))
                for sid in LINES}


async def run_barrier(pods: Pods, *, stalled: str = "", tokens: dict[str, str] | None = None,
                      grow: dict[str, int] | None = None, upload_timeout_s: float = 5.0
                      ) -> tuple[Verdict, int, Dispatch, float]:
    """One Kubernetes raw run through the barrier; `stalled` names a worker-group-manager that
    never answers its upload. Returns the verdict, the report's exit code, the dispatcher and
    the time from the first `UploadRawRecords` to the verdict."""
    processors = pods.processors(grow)
    async with aiohttp.ClientSession() as http, anyio.create_task_group() as services:
        api = Api(events=NoEvents(), artifact_dir=pods.controller, dataset_dir=pods.controller / "dataset",
                  compressed_dataset=True, host="127.0.0.1", port=0, server_factory=granian_server,
                  upload_token=TOKEN)
        await services.start(api.run)
        handlers: dict[str, Handler] = dict(processors)
        for group in pods.pods:
            sid = f"worker-group-manager-{group}"
            manager = WorkerGroupManager(service_id=sid, group_id=group, members=[], api_url=api.url,
                                         raw_uploader=RawUploader(session=http, retry=FAST,
                                                                  token=(tokens or {}).get(group, TOKEN)))
            handlers[sid] = _group_manager(manager, stalled=sid == stalled)
        async with anyio.create_task_group() as answers:
            router = Dispatch(answers, handlers)
            router.register_everyone()
            driver = ProfileDriver(config=pods.config, raw_upload_timeout_s=upload_timeout_s)
            controller = SystemController(config=pods.config, control=ControlServer(router), launcher=NoLauncher(),
                                          driver=driver)
            with anyio.fail_after(30):
                verdict = await controller.run()
            ended = time.monotonic()
            answers.cancel_scope.cancel()
            router.close()
        services.cancel_scope.cancel()
    code = report(pods.config, verdict, driver.outcome)
    return verdict, code, router, ended - router.asked.get("UploadRawRecords", ended)


def _group_manager(manager: WorkerGroupManager, *, stalled: bool) -> Handler:
    async def handle(command: Command[Any]) -> Reply | None:
        match command:
            case PrepareGroup():  # the dataset download is another test's business
                return GroupReady(dataset_dir=command.dataset_dir, group_id=manager.group_id, members=[],
                                  conversations=3)
            case UploadRawRecords() if stalled:
                return None
            case UploadRawRecords():
                return await manager.handle(command)
        return Ack()

    return handle


def _ready(pods: Pods) -> bool:
    return (pods.controller / READY_MARKER).exists()


async def test_every_pod_uploads_and_the_join_precedes_the_marker(tmp_path: Path) -> None:
    pods = Pods(tmp_path)
    verdict, code, _, _ = await run_barrier(pods)
    assert (verdict.state, verdict.reason, code) == (SystemState.DONE, "", 0)
    expected = b"".join(p.content() for _, p in sorted(pods.processors().items()))
    assert (pods.controller / "profile_export_raw.jsonl").read_bytes() == expected
    assert len(expected.splitlines()) == sum(LINES.values())
    assert _ready(pods)
    assert not (pods.controller / "raw").exists()  # the uploaded parts were joined and removed
    assert not [p for p in pods.controller.rglob(".*") if p.name != READY_MARKER], "staging files left"


async def test_a_missing_upload_at_the_deadline_fails_naming_the_pod(tmp_path: Path) -> None:
    pods = Pods(tmp_path)
    verdict, code, _, to_verdict = await run_barrier(pods, stalled="worker-group-manager-g1", upload_timeout_s=1.0)
    assert verdict.state is SystemState.FAILED and code == 1
    assert verdict.reason == ("raw records not uploaded: worker pod g1 (worker-group-manager-g1): "
                              "no upload acknowledged within 1s"), verdict.reason
    assert not _ready(pods) and not (pods.controller / "profile_export_raw.jsonl").exists()
    assert 1.0 <= to_verdict < 10.0, to_verdict
    print(f"missing upload: verdict {to_verdict:.2f}s after the upload command (deadline 1s)")


async def test_a_part_that_differs_from_its_acknowledged_size_fails_naming_the_pod(tmp_path: Path) -> None:
    pods = Pods(tmp_path)
    verdict, code, _, _ = await run_barrier(pods, grow={"record-processor-g1-0": 5})
    assert verdict.state is SystemState.FAILED and code == 1
    assert verdict.reason.startswith("raw records not uploaded: worker pod g1 (worker-group-manager-g1): raw part "
                                     "record-processor-g1-0.jsonl: "), verdict.reason
    assert "bytes but its record-processor acknowledged" in verdict.reason and "\n" not in verdict.reason
    assert not _ready(pods) and not (pods.controller / "profile_export_raw.jsonl").exists()


async def test_an_upload_with_another_runs_token_is_refused(tmp_path: Path) -> None:
    pods = Pods(tmp_path)
    other = CurveKeys.generate().http_token(RAW_UPLOAD_TOKEN)
    verdict, code, _, _ = await run_barrier(pods, tokens={"g0": other})
    assert verdict.state is SystemState.FAILED and code == 1
    assert verdict.reason.startswith("raw records not uploaded: worker pod g0 (worker-group-manager-g0): PUT "), \
        verdict.reason
    assert "HTTP 401" in verdict.reason
    assert not _ready(pods)
    assert not (pods.controller / "raw" / "record-processor-g0-0.jsonl").exists()

