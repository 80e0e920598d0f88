"""Same-name recreation fencing decided from the controller owner reference alone."""

from __future__ import annotations

from typing import Any

from aiperf.operator.ownership import Verdict, claim


def obj(*refs: dict[str, Any], deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "aiperf-run", "ownerReferences": list(refs)}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"kind": "JobSet", "metadata": meta}


def ref(uid: str = "new", *, name: str = "run", kind: str = "AIPerfJob", controller: bool = True,
        api_version: str = "aiperf.nvidia.com/v1alpha1") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": controller}


def verdict(existing: dict[str, Any]) -> Verdict:
    return claim(existing, owner_name="run", owner_uid="new").verdict


def test_ours_is_adopted() -> None:
    assert verdict(obj(ref())) is Verdict.ADOPT


def test_an_older_incarnation_or_a_terminating_one_is_waited_for() -> None:
    assert verdict(obj(ref("old"))) is Verdict.WAIT
    assert verdict(obj(ref(), deleting=True)) is Verdict.WAIT
    assert "uid old" in claim(obj(ref("old")), owner_name="run", owner_uid="new").reason


def test_ownerless_unrelated_or_non_controller_owners_are_foreign() -> None:
    assert verdict(obj()) is Verdict.FOREIGN
    assert verdict(obj(ref(controller=False))) is Verdict.FOREIGN
    assert verdict(obj(ref(name="other"))) is Verdict.FOREIGN
    assert verdict(obj(ref(kind="AIPerfSweep"))) is Verdict.FOREIGN
    assert verdict(obj(ref(api_version="example.com/v1"))) is Verdict.FOREIGN
    message = claim(obj(ref(name="other")), owner_name="run", owner_uid="new").reason
    assert "owned by AIPerfJob other" in message and "\n" not in message
