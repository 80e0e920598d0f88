"""`ServiceCounts` (uneven last group) and `RuntimeOptions.max_lost_worker_fraction`."""

from __future__ import annotations

import msgspec
import pytest

from aiperf.config import RunConfig, RuntimeOptions, ServiceCounts, group_id, group_index
from aiperf.messages import ServiceType


def test_defaults_are_one_group_of_one() -> None:
    counts = ServiceCounts()
    assert counts.last_group_workers is None
    assert counts.workers_in(0) == 1
    assert counts.expected()[ServiceType.WORKER] == 1
    assert ServiceType.SYSTEM_CONTROLLER not in counts.expected()


def test_even_split_counts_every_group_alike() -> None:
    counts = ServiceCounts(worker_groups=3, workers_per_group=4, record_processors_per_group=2)
    assert [counts.workers_in(g) for g in range(3)] == [4, 4, 4]
    expected = counts.expected()
    assert expected[ServiceType.WORKER] == 12
    assert expected[ServiceType.WORKER_GROUP_MANAGER] == 3
    assert expected[ServiceType.RECORD_PROCESSOR] == 6
    assert expected[ServiceType.TIMING_MANAGER] == 1


def test_the_last_group_may_be_smaller() -> None:
    counts = ServiceCounts(worker_groups=3, workers_per_group=10, last_group_workers=3)
    assert [counts.workers_in(g) for g in range(3)] == [10, 10, 3]
    assert counts.total_workers == 23
    assert counts.expected()[ServiceType.WORKER] == 23
    assert counts.expected()[ServiceType.RECORD_PROCESSOR] == 3


@pytest.mark.parametrize("group", [-1, 3])
def test_workers_in_refuses_a_group_outside_the_run(group: int) -> None:
    with pytest.raises(ValueError, match="not in 0..2"):
        ServiceCounts(worker_groups=3).workers_in(group)


@pytest.mark.parametrize(("groups", "per_group", "last", "reason"), [
    (1, 4, 2, "worker_groups >= 2"),
    (2, 4, 4, "1..3"),
    (2, 4, 0, "1..3"),
    (2, 1, 1, "1..0"),
    (0, 1, None, "at least 1"),
    (1, 0, None, "at least 1"),
])
def test_invalid_counts_are_refused(groups: int, per_group: int, last: int | None, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        ServiceCounts(worker_groups=groups, workers_per_group=per_group, last_group_workers=last)


def test_a_config_document_with_a_bad_last_group_does_not_decode() -> None:
    doc = {"run_id": "r", "comms": {"ipc_dir": "/tmp"},
           "services": {"worker_groups": 1, "workers_per_group": 4, "last_group_workers": 2}}
    with pytest.raises(msgspec.ValidationError, match="worker_groups >= 2"):
        msgspec.convert(doc, RunConfig)


def test_a_kubernetes_layout_document_round_trips() -> None:
    # what libs/kube writes for 23 workers at 10 per pod
    doc = {"worker_groups": 3, "workers_per_group": 10, "record_processors_per_group": 3,
           "last_group_workers": 3}
    counts = msgspec.convert(doc, ServiceCounts)
    assert counts.total_workers == 23
    assert msgspec.to_builtins(counts) == doc


def test_group_ids() -> None:
    assert group_id(7) == "g7"
    assert group_index("g12") == 12
    for bad in ("", "g", "x1", "g-1", "g1a", "g١"):
        with pytest.raises(ValueError, match="not a worker group id"):
            group_index(bad)


def test_max_lost_worker_fraction() -> None:
    assert RuntimeOptions().max_lost_worker_fraction == 0.5
    assert RuntimeOptions(max_lost_worker_fraction=0.0).max_lost_worker_fraction == 0.0
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="max_lost_worker_fraction"):
            RuntimeOptions(max_lost_worker_fraction=bad)
