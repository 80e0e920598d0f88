"""Which service instances a run needs, and their ids."""

from __future__ import annotations

from aiperf.config import ServiceCounts, group_id
from aiperf.messages import ServiceType
from aiperf.system_controller.launcher import Planned

START_ORDER = (
    ServiceType.EVENT_BUS_PROXY,
    ServiceType.RECORDS_MANAGER,
    ServiceType.TIMING_MANAGER,
    ServiceType.DATASET_MANAGER,
    ServiceType.API,
    ServiceType.WORKER_GROUP_MANAGER,
    ServiceType.RECORD_PROCESSOR,
    ServiceType.WORKER,
)
"""Start order: the event bus first so early events are not lost, consumers before producers."""


def plan_services(counts: ServiceCounts) -> list[Planned]:
    """Every instance of the run except the controller itself, in start order.

    Ids: singletons are named by their type; scaled ones `<type>-<group>-<i>` with groups
    `g<k>`; group `g<k>` has `counts.workers_in(k)` workers (the last one may be smaller)."""
    planned: list[Planned] = []
    groups = [(g, group_id(g)) for g in range(counts.worker_groups)]
    for service_type in START_ORDER:
        if service_type is ServiceType.WORKER_GROUP_MANAGER:
            planned += [Planned(service_type=service_type, service_id=f"{service_type}-{gid}", group_id=gid)
                        for _, gid in groups]
        elif service_type is ServiceType.WORKER:
            planned += [Planned(service_type=service_type, service_id=f"worker-{gid}-{i}", group_id=gid)
                        for g, gid in groups for i in range(counts.workers_in(g))]
        elif service_type is ServiceType.RECORD_PROCESSOR:
            planned += [Planned(service_type=service_type, service_id=f"record-processor-{gid}-{i}",
                                group_id=gid)
                        for _, gid in groups for i in range(counts.record_processors_per_group)]
        else:
            planned.append(Planned(service_type=service_type, service_id=str(service_type)))
    return planned
