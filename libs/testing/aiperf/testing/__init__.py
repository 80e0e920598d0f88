"""Fakes of aiperf services at our own boundaries (real sockets, scripted behaviour), for
tests and for running one service alone: `aiperf dev-fakes --for TYPE` (`aiperf.testing.devfakes`)."""

from aiperf.testing.fake_bus import EventTap, FakeEventBus
from aiperf.testing.fake_services import (
    FakeRunRecordsManager,
    FakeRunTimingManager,
    ScriptedService,
    controller_peers,
)
from aiperf.testing.fake_workers import FakeWorkers
from aiperf.testing.fakes import (
    FakeController,
    FakeRecordProcessor,
    FakeRecordsManager,
    FakeTimingManager,
)
from aiperf.testing.feeds import MetricRecordFeed, RawRecordFeed, streamed_chat_record

__all__ = [
    "EventTap", "FakeController", "FakeEventBus", "FakeRecordProcessor", "FakeRecordsManager",
    "FakeRunRecordsManager", "FakeRunTimingManager", "FakeTimingManager", "FakeWorkers", "MetricRecordFeed",
    "RawRecordFeed", "ScriptedService", "controller_peers", "streamed_chat_record",
]
