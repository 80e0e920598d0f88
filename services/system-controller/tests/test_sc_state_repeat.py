"""The controller's state, broadcast again every `STATE_EVERY_S`: a subscriber that missed a
change (it subscribed after it was published) learns the state from the next repeat."""

from __future__ import annotations

import functools

import anyio
import pytest

from aiperf.messages import Event, SystemState, SystemStateChanged
from aiperf.system_controller.runner import STATE_EVERY_S, repeat_state

pytestmark = pytest.mark.anyio


async def test_the_state_as_it_is_then_is_broadcast_at_every_repeat() -> None:
    current = SystemState.CONFIGURING
    sent: list[Event] = []
    third = anyio.Event()

    async def publish(event: Event) -> None:
        nonlocal current
        sent.append(event)
        if len(sent) == 2:
            current = SystemState.PROFILING
        if len(sent) == 3:
            third.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(repeat_state, publish, lambda: current, every_s=0.001))
            await third.wait()
            tg.cancel_scope.cancel()
    assert sent == [SystemStateChanged(state=SystemState.CONFIGURING),
                    SystemStateChanged(state=SystemState.CONFIGURING),
                    SystemStateChanged(state=SystemState.PROFILING)]
    assert 0 < STATE_EVERY_S <= 2  # what the api may show stale, at worst
