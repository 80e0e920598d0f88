"""The operator's watch on a run's controller, from what the controller itself writes on the CR
(`aiperf.kuberun.status_push`): `status.controllerFailure` and the heartbeat annotation.

- `status.controllerFailure` (the run's verdict was a failure): the run fails at once with
  condition `ControllerFailed` True, the controller's own reason (else `ControllerFailure`) and
  message, instead of waiting for the control plane to exit ("see kube logs").
- The heartbeat (`HEARTBEAT_ANNOTATION`, refreshed with every status push, every few seconds):
  once one has been seen (heartbeat-gated: a controller that never started is the startup
  diagnosis's business), a heartbeat older than `lost_after_s` fails the run with condition
  `ControllerFailed` True, reason `HeartbeatLost`, and its JobSet is deleted as after a timeout
  (a hung controller would otherwise hold the pods until a timeout that may not exist). Not
  while the controller reported `resultsExported` (the exports are written; the harvest ends
  the run) nor once it reported `controllerFailure`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from aiperf.kuberun.status_push import HEARTBEAT_ANNOTATION
from aiperf.operator.status import Cond, parse_time

FAILED_CONDITION = "ControllerFailed"
HEARTBEAT_LOST = "HeartbeatLost"


def heartbeat_of(cr: Mapping[str, Any]) -> datetime | None:
    """The controller's last heartbeat on the CR, None before the first (or when unreadable)."""
    return parse_time(((cr.get("metadata") or {}).get("annotations") or {}).get(HEARTBEAT_ANNOTATION))


def failure_reported(cr: Mapping[str, Any]) -> Cond | None:
    """`ControllerFailed` with the controller's reason and message when it reported
    `status.controllerFailure`, else None."""
    failure = (cr.get("status") or {}).get("controllerFailure")
    if not isinstance(failure, Mapping):
        return None
    service = f" ({failure['service']})" if failure.get("service") else ""
    return Cond(FAILED_CONDITION, True, str(failure.get("reason") or "ControllerFailure"),
                f"the controller reported a failure{service}: {failure.get('message') or 'no message'}")


def heartbeat_lost(cr: Mapping[str, Any], *, now: datetime, lost_after_s: float) -> Cond | None:
    """`ControllerFailed`/`HeartbeatLost` when the CR's last heartbeat is older than
    `lost_after_s` (see the module doc for when it is not judged), else None."""
    beat = heartbeat_of(cr)
    status = cr.get("status") or {}
    if beat is None or status.get("resultsExported") is True or status.get("controllerFailure"):
        return None
    silent = (now - beat).total_seconds()
    if silent <= lost_after_s:
        return None
    return Cond(FAILED_CONDITION, True, HEARTBEAT_LOST,
                f"no controller heartbeat since {beat.strftime('%Y-%m-%dT%H:%M:%SZ')} ({silent:.0f} s, over "
                f"{lost_after_s:g} s): the controller is hung or gone; see `aiperf kube logs "
                f"{cr['metadata']['name']} -n {cr['metadata']['namespace']}`")
