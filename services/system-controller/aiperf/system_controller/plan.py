"""Which service instances a run needs, and their ids."""

from __future__ import annotations

from aiperf.config import ServiceCounts, group_id
from aiperf.config.catalog import CATALOG, Scale
from aiperf.messages import ServiceType
from aiperf.system_controller.launcher import Planned


def plan_services(counts: ServiceCounts) -> list[Planned]:
    """Every instance of the run except the controller itself, in the catalog's start order.

    Ids: singletons are named by their type; a group's worker-group-manager
    `worker-group-manager-<group>`, its other members `<type>-<group>-<i>` with groups `g<k>`;
    group `g<k>` has `counts.workers_in(k)` workers (the last one may be smaller)."""
    planned: list[Planned] = []
    for spec in CATALOG:
        if spec.type is ServiceType.SYSTEM_CONTROLLER:
            continue
        if spec.scale is Scale.ONE:
            planned.append(Planned(service_type=spec.type, service_id=str(spec.type)))
            continue
        for g in range(counts.worker_groups):
            gid = group_id(g)
            if spec.scale is Scale.PER_GROUP:
                planned.append(Planned(service_type=spec.type, service_id=f"{spec.type}-{gid}", group_id=gid))
                continue
            planned += [Planned(service_type=spec.type, service_id=f"{spec.type}-{gid}-{i}", group_id=gid)
                        for i in range(counts.instances_in(g, spec.scale))]
    return planned
