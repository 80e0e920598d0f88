"""A tiny service run as a real process by the runtime tests.

argv: MODE CONFIG_PATH SERVICE_ID, MODE one of: ok, crash-at-start, user-error, finish.
"""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack
from typing import Any

import anyio
from anyio.abc import TaskStatus

from aiperf.config import load_run_config
from aiperf.messages import Command, CreditsLost, Reply, ServiceType, WorkerLost
from aiperf.runtime import Service, ServiceContext, UnknownCommand, UserError, run_service


class Demo:
    def __init__(self, mode: str) -> None:
        self.mode = mode

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        if self.mode == "crash-at-start":
            raise RuntimeError("boom at start")
        if self.mode == "user-error":
            raise UserError("--input-file data.jsonl: no such file")
        task_status.started()
        if self.mode == "finish":
            return
        await anyio.sleep_forever()

    async def handle(self, command: Command[Any]) -> Reply | None:
        match command:
            case WorkerLost(worker_id=worker_id):
                return CreditsLost(lost=len(worker_id))
            case _:
                raise UnknownCommand(f"cannot {type(command).__name__.lower()}")


def main() -> int:
    mode, config_path, service_id = sys.argv[1:4]

    async def build(ctx: ServiceContext, stack: AsyncExitStack) -> Service:
        return Demo(mode)

    return run_service(config=load_run_config(config_path), service_type=ServiceType.WORKER,
                       service_id=service_id, build=build)


if __name__ == "__main__":
    sys.exit(main())
