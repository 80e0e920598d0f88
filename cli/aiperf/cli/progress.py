"""`--ui simple`: a progress bar fed by the records-manager's `Progress` broadcasts."""

from __future__ import annotations

import time

import anyio
import zmq.asyncio
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from aiperf.comms import Addressing, BadMessage, Channel, Subscriber
from aiperf.messages import Progress as ProgressEvent


async def show_progress(ctx: zmq.asyncio.Context, addressing: Addressing, *, total: int | None,
                        duration_s: float | None, started: anyio.Event) -> None:
    """Render progress until cancelled: by request count when known, else by elapsed time."""
    async with Subscriber(ctx, connect=[addressing.connect_endpoint(Channel.EVENT_BUS_BACKEND)],
                          topics=[b"progress"]) as sub:
        await started.wait()
        t0 = time.monotonic()
        columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("errors {task.fields[errors]}"), TimeElapsedColumn()]
        with Progress(*columns, transient=False) as bar:
            task = bar.add_task("profiling", total=total if duration_s is None else duration_s,
                                errors=0)
            while True:
                with anyio.move_on_after(0.5):
                    try:
                        event = await sub.recv()
                    except BadMessage:  # a broadcast we cannot read: the next one will do
                        continue
                    if isinstance(event, ProgressEvent):
                        if duration_s is None:
                            bar.update(task, completed=event.completed, errors=event.errors,
                                       description=str(event.phase))
                        else:
                            bar.update(task, errors=event.errors, description=str(event.phase))
                if duration_s is not None:
                    bar.update(task, completed=min(duration_s, round(time.monotonic() - t0, 1)))
