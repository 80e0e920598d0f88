"""Same-name recreation fencing: may an object found under a run's deterministic name be adopted?

An object is the CR's only when its controller owner reference names that CR's kind, name and
immutable UID. Labels never decide ownership.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiperf.crd.model import API_GROUP, JOB_KIND


class Verdict(enum.Enum):
    """What to do with an existing object that holds a name we need."""

    ADOPT = "adopt"  # ours (this incarnation of the CR), not being deleted: use it
    WAIT = "wait"  # an older incarnation's, or ours but terminating: garbage collection will free the name
    FOREIGN = "foreign"  # not owned by any AIPerfJob of this name: never taken over


@dataclass(frozen=True)
class Claim:
    """A verdict and the one-line reason a `kubectl describe` reader sees."""

    verdict: Verdict
    reason: str


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The owner reference with `controller: true`, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") is True:
            return dict(ref)
    return None


def claim(existing: Mapping[str, Any], *, owner_name: str, owner_uid: str, owner_kind: str = JOB_KIND) -> Claim:
    """Judge `existing` against the `owner_kind` (AIPerfJob or AIPerfSweep) `owner_name` with UID
    `owner_uid` (see `Verdict`)."""
    meta = existing.get("metadata") or {}
    what = f"{existing.get('kind', 'object')} {meta.get('name', '?')}"
    ref = controller_of(existing)
    if ref is None:
        return Claim(Verdict.FOREIGN, f"{what} already exists and no {owner_kind} owns it; delete it or "
                                      f"use another {owner_kind} name")
    group = str(ref.get("apiVersion", "")).partition("/")[0]
    if ref.get("kind") != owner_kind or group != API_GROUP or ref.get("name") != owner_name:
        return Claim(Verdict.FOREIGN, f"{what} already exists, owned by {ref.get('kind')} {ref.get('name')}; "
                                      f"delete it or use another {owner_kind} name")
    if ref.get("uid") != owner_uid:
        return Claim(Verdict.WAIT, f"{what} still belongs to an earlier {owner_kind} {owner_name} "
                                   f"(uid {ref.get('uid')}); waiting for garbage collection to remove it")
    if meta.get("deletionTimestamp"):
        return Claim(Verdict.WAIT, f"{what} is being deleted; waiting until it is gone")
    return Claim(Verdict.ADOPT, f"{what} already belongs to this {owner_kind}")
