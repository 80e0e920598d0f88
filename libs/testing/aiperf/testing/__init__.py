"""Fakes of aiperf services at our own boundaries (real sockets, scripted behaviour), for
tests and for running one service alone: `aiperf dev-fakes --for worker`."""

from aiperf.testing.fakes import (
    FakeController,
    FakeRecordProcessor,
    FakeRecordsManager,
    FakeTimingManager,
)

__all__ = ["FakeController", "FakeRecordProcessor", "FakeRecordsManager", "FakeTimingManager"]
