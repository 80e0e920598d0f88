"""Kubernetes `--export-level raw`: the controller's side of the upload barrier, against
scripted services (the HTTP side runs for real in tests/integration/test_raw_barrier.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from aiperf.config import Artifacts, Benchmark, CommsOptions, RunConfig, RuntimeOptions, ServiceCounts
from aiperf.messages import (
    Command,
    FlushRawRecords,
    RawPart,
    RawRecordsFlushed,
    RawRecordsUploaded,
    SystemState,
    UploadRawRecords,
)
from aiperf.runtime.control_server import ControlServer
from aiperf.system_controller.launcher import NoLauncher
from aiperf.system_controller.profile_driver import ProfileDriver
from aiperf.system_controller.service import SystemController
from tests._sc_fakes import Answer, FakeRouter
from tests.test_sc_configure import answer_plainly

pytestmark = pytest.mark.anyio

COUNTS = ServiceCounts(worker_groups=2, workers_per_group=1, record_processors_per_group=1)


def config(tmp_path: Path) -> RunConfig:
    return RunConfig(run_id="r", mode="profile", kubernetes=True, artifact_dir=str(tmp_path),
                     comms=CommsOptions(ipc_dir="/tmp"), services=COUNTS,
                     benchmark=Benchmark(models=["m"], artifacts=Artifacts(export_level="raw")),
                     runtime=RuntimeOptions(command_timeout_s=5, registration_timeout_s=5))


async def test_an_acknowledgement_of_other_parts_fails_naming_the_pod(router: FakeRouter, tmp_path: Path) -> None:
    """A worker-group-manager that answers for parts it was not sent (or with other sizes) does
    not pass the barrier, whatever the api holds."""
    uploads: dict[str, UploadRawRecords] = {}

    def answer(sid: str, command: Command[Any]) -> Answer:
        match command:
            case FlushRawRecords():
                return RawRecordsFlushed(path=f"/aiperf/artifacts/raw/{sid}.jsonl", size=100, records=0)
            case UploadRawRecords():
                uploads[sid] = command
                parts = [RawPart(name=p.name, size=p.size - (sid.endswith("g1")), records=p.records)
                         for p in command.parts]
                return RawRecordsUploaded(parts=parts)
        return answer_plainly(sid, command)

    router.answer = answer
    router.register_plan(COUNTS)
    cfg = config(tmp_path)
    controller = SystemController(config=cfg, control=ControlServer(router), launcher=NoLauncher(),
                                  driver=ProfileDriver(config=cfg))
    with anyio.fail_after(20):
        verdict = await controller.run()
    assert verdict.state is SystemState.FAILED
    assert verdict.reason == ("raw records not uploaded: worker pod g1 (worker-group-manager-g1): acknowledged "
                              "{'record-processor-g1-0.jsonl': 99} for the parts {'record-processor-g1-0.jsonl': 100}")
    # each pod was asked for its own group's parts only, with the paths in its pod
    assert {sid: [(p.name, p.path) for p in c.parts] for sid, c in uploads.items()} == {
        f"worker-group-manager-{g}": [(f"record-processor-{g}-0.jsonl",
                                       f"/aiperf/artifacts/raw/record-processor-{g}-0.jsonl")] for g in ("g0", "g1")}
