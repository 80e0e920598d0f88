"""`kube cleanup` against the fake API server: only finished runs older than --older-than go,
each delete fenced on the UID listed (a same-name run created meanwhile is kept)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from aiperf.cli.kube_cleanup import cleanup
from aiperf.cli.kube_flags import parse_duration
from aiperf.cli.kube_options import KubeTarget
from aiperf.cli.profile_args import FlagError
from aiperf.crd.generator import build_crd
from aiperf.crd.model import JOB_KIND
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio

NS = "bench"
CR_API = "aiperf.nvidia.com/v1alpha1"
JS_API = "jobset.x-k8s.io/v1alpha2"
CR_PATH = f"/apis/{CR_API}/namespaces/{NS}/aiperfjobs"
BENCH = ("--model", "Qwen/Qwen3-0.6B", "--url", "http://vllm.llm.svc:8000", "--request-count", "80")
Run = Callable[..., Awaitable[Any]]


def target(kube: FakeKube) -> tuple[str, ...]:
    return ("--kubeconfig", kube.kubeconfig_path, "-n", NS)


def ago(hours: float) -> str:
    return (datetime.now(UTC) - timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")


async def submit(aiperf: Run, kube: FakeKube, name: str, *mode: str) -> None:
    result = await aiperf("kube", "profile", *BENCH, "--name", name, "--total-workers", "2", "--detach", *mode,
                          *target(kube))
    assert result.code == 0, result.err


def finish_jobset(kube: FakeKube, name: str, state: str, hours_ago: float) -> None:
    kube.set_status(JS_API, "JobSet", NS, f"aiperf-{name}", {"conditions": [
        {"type": state, "status": "True", "lastTransitionTime": ago(hours_ago)}]})


def finish_job(kube: FakeKube, name: str, phase: str, hours_ago: float) -> None:
    kube.set_status(CR_API, JOB_KIND, NS, name, {"phase": phase, "completionTime": ago(hours_ago)})


def uid(kube: FakeKube, api_version: str, kind: str, name: str) -> str:
    obj = kube.get(api_version, kind, NS, name)
    assert obj is not None
    return str(obj["metadata"]["uid"])


async def test_direct_mode_deletes_finished_runs_older_than_the_limit(aiperf: Run, kube: FakeKube) -> None:
    for name in ("old", "failed", "fresh", "running", "cancelled"):
        await submit(aiperf, kube, name)
    finish_jobset(kube, "old", "Completed", 3)
    finish_jobset(kube, "failed", "Failed", 2)
    finish_jobset(kube, "fresh", "Completed", 0.1)
    assert (await aiperf("kube", "cancel", "cancelled", *target(kube))).code == 0  # Suspended: kept
    old_uid = uid(kube, JS_API, "JobSet", "aiperf-old")
    kube.requests.clear()

    result = await aiperf("kube", "cleanup", "--older-than", "1h", "--yes", *target(kube))
    assert result.code == 0, result.err
    *deleted, summary = result.out.splitlines()
    assert sorted(deleted) == [
        "deleted JobSet bench/aiperf-failed with its ConfigMap, Secret, RoleBinding, Role, ServiceAccount",
        "deleted JobSet bench/aiperf-old with its ConfigMap, Secret, RoleBinding, Role, ServiceAccount"]
    assert summary == "2 deleted, 0 kept, 0 failed; left alone: 2 unfinished, 1 finished less than 1h ago"
    deletes = [r for r in kube.requests_for("DELETE") if r.path.endswith(("aiperf-old", "aiperf-old-config",
                                                                           "aiperf-old-curve"))]
    assert [r.path.rsplit("/", 2)[-2:] for r in deletes] == [
        ["jobsets", "aiperf-old"], ["configmaps", "aiperf-old-config"], ["secrets", "aiperf-old-curve"],
        ["rolebindings", "aiperf-old"], ["roles", "aiperf-old"], ["serviceaccounts", "aiperf-old"]]
    assert deletes[0].body["preconditions"] == {"uid": old_uid}
    assert len(kube.requests_for("DELETE")) == 12
    await kube.wait_until(lambda: all(kube.get(JS_API, "JobSet", NS, f"aiperf-{n}") is None
                                      for n in ("old", "failed")))  # Foreground deletion ends with GC
    listed = await aiperf("kube", "list", *target(kube))
    assert sorted(line.split()[0] for line in listed.out.splitlines()[1:]) == ["cancelled", "fresh", "running"]


async def test_operator_mode_dry_run_then_delete(aiperf: Run, kube: FakeKube) -> None:
    kube.install_crd(build_crd(JOB_KIND))
    for name in ("done", "failed", "cancelled", "running"):
        await submit(aiperf, kube, name, "--operator")
    finish_job(kube, "done", "Completed", 5)
    finish_job(kube, "failed", "Failed", 5)
    finish_job(kube, "cancelled", "Cancelled", 5)
    kube.set_status(CR_API, JOB_KIND, NS, "running", {"phase": "Running"})
    kube.requests.clear()

    dry = await aiperf("kube", "cleanup", "--dry-run", *target(kube))
    assert dry.code == 0, dry.err
    *would, summary = dry.out.splitlines()
    assert sorted(would) == [
        "would delete AIPerfJob bench/cancelled (Cancelled 5h ago)", "would delete AIPerfJob bench/done (Completed 5h ago)",
        "would delete AIPerfJob bench/failed (Failed 5h ago)"]
    assert summary == "3 would be deleted (--dry-run: nothing deleted); left alone: 1 unfinished"
    assert kube.requests_for("DELETE") == []

    uids = {n: uid(kube, CR_API, JOB_KIND, n) for n in ("done", "failed", "cancelled")}
    result = await aiperf("kube", "cleanup", "-y", *target(kube))
    assert result.code == 0, result.err
    assert sorted((r.path, r.body["preconditions"]["uid"]) for r in kube.requests_for("DELETE")) == sorted(
        (f"{CR_PATH}/{n}", uids[n]) for n in ("done", "failed", "cancelled"))
    assert result.out.splitlines()[-1] == "3 deleted, 0 kept, 0 failed; left alone: 1 unfinished"
    again = await aiperf("kube", "cleanup", "-y", *target(kube))
    assert again.out == "nothing to clean up in namespace bench (1 unfinished)\n"


async def test_a_same_name_run_created_after_the_list_is_kept(aiperf: Run, kube: FakeKube) -> None:
    kube.install_crd(build_crd(JOB_KIND))
    await submit(aiperf, kube, "cr", "--operator")
    await submit(aiperf, kube, "js", "--no-operator")
    finish_job(kube, "cr", "Completed", 2)
    finish_jobset(kube, "js", "Failed", 2)
    old_cr_uid = uid(kube, CR_API, JOB_KIND, "cr")
    loop = anyio.lowlevel.current_token()
    job_info, jobset_info = kube.kind(CR_API, JOB_KIND), kube.kind(JS_API, "JobSet")

    def replace() -> None:
        """Both runs are deleted and created anew under the same names, between list and delete."""
        for info, name in ((job_info, "cr"), (jobset_info, "aiperf-js")):
            old = kube.get(info.api_version, info.kind, NS, name)
            assert old is not None
            kube.store.system_remove(kube.store.key(info, NS, name))
            fresh = {k: v for k, v in old.items() if k != "status"}
            fresh["metadata"] = {k: v for k, v in old["metadata"].items()
                                 if k in ("name", "namespace", "labels", "annotations")}
            kube.create(fresh)

    def confirm(question: str) -> bool:
        assert question == "delete these 2 runs?"
        anyio.from_thread.run_sync(replace, token=loop)
        return True

    runner = KubeTarget(kubeconfig=kube.kubeconfig_path, namespace=NS)
    code = await anyio.to_thread.run_sync(lambda: cleanup(runner, older_than="1h", all_namespaces=False,
                                                          dry_run=False, yes=False, confirm=confirm))
    assert code == 0
    assert kube.get(CR_API, JOB_KIND, NS, "cr") is not None
    assert kube.get(JS_API, "JobSet", NS, "aiperf-js") is not None
    # The CR's delete carried the old uid (409); the JobSet's uid check found the new one first.
    (refused,) = kube.requests_for("DELETE")
    assert refused.path == f"{CR_PATH}/cr" and refused.body["preconditions"]["uid"] == old_cr_uid
    assert kube.get("v1", "ConfigMap", NS, "aiperf-js-config") is not None  # the new run's objects stay


async def test_cleanup_refuses_without_yes_and_bad_durations(aiperf: Run, kube: FakeKube) -> None:
    result = await aiperf("kube", "cleanup", *target(kube))
    assert (result.code, result.err) == (2, "error: kube cleanup deletes runs: pass --yes to confirm (or "
                                            "--dry-run to see what would go)\n")
    bad = await aiperf("kube", "cleanup", "--older-than", "3 weeks", "--yes", *target(kube))
    assert (bad.code, bad.err) == (2, "error: --older-than '3 weeks': expected a duration such as 90, 30s, 15m, "
                                      "2h, 7d or 1h30m\n")
    assert kube.requests == []


@pytest.mark.parametrize(("text", "seconds"), [("90", 90), ("0", 0), ("30s", 30), ("15m", 900), ("2h", 7200),
                                               ("7d", 604800), ("1h30m", 5400), ("1.5h", 5400)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration("--older-than", text) == seconds


@pytest.mark.parametrize("text", ["", "-5", "1w", "h", "inf", "nan", "1h 30m", "30s1"])
def test_malformed_durations(text: str) -> None:
    with pytest.raises(FlagError, match="expected a duration"):
        parse_duration("--older-than", text)
