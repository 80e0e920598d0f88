"""`kube list` and `kube list --watch` against the fake API server: AIPerfJobs (operator mode) and
direct-mode JobSets in one table, then a row per change through cut and expired watches."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from aiperf.cli.kube_list import watch_runs
from aiperf.crd.generator import build_crd
from aiperf.crd.model import JOB_KIND
from aiperf.kubeapi import connect
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio

NS = "bench"
CR_API = "aiperf.nvidia.com/v1alpha1"
JS_API = "jobset.x-k8s.io/v1alpha2"
BENCH = ("--model", "Qwen/Qwen3-0.6B", "--url", "http://vllm.llm.svc:8000", "--request-count", "80")
Run = Callable[..., Awaitable[Any]]


def target(kube: FakeKube) -> tuple[str, ...]:
    return ("--kubeconfig", kube.kubeconfig_path, "-n", NS)


async def submit(aiperf: Run, kube: FakeKube, name: str, *mode: str) -> None:
    result = await aiperf("kube", "profile", *BENCH, "--name", name, "--total-workers", "2", "--detach", *mode,
                          *target(kube))
    assert result.code == 0, result.err


class Lines:
    """What the watch printed, with a wait for a line (no sleeping)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._added = anyio.Event()

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        self._added.set()
        self._added = anyio.Event()

    async def wait_for(self, *cells: str) -> list[str]:
        """The first printed row whose cells start with `cells` (waiting up to 10 s)."""
        with anyio.fail_after(10):
            while True:
                for line in self.lines:
                    if line.split()[:len(cells)] == list(cells):
                        return line.split()
                await self._added.wait()


async def test_list_shows_aiperfjobs_with_progress_beside_direct_runs(aiperf: Run, kube: FakeKube) -> None:
    kube.install_crd(build_crd(JOB_KIND))
    await submit(aiperf, kube, "direct", "--no-operator")
    await submit(aiperf, kube, "op", "--operator")
    kube.set_status(CR_API, JOB_KIND, NS, "op", {"phase": "Running", "requestsCompleted": 10, "requestsTotal": 80})
    result = await aiperf("kube", "list", *target(kube))
    assert result.code == 0, result.err
    header, *rows = (line.split() for line in result.out.splitlines())
    assert header == ["NAME", "STATE", "PROGRESS", "AGE"]
    assert sorted(r[:3] for r in rows) == [["direct", "Running", rows[0][2]], ["op", "Running", "10/80"]]
    assert rows[0][2].endswith("s")  # no progress column value for a direct run: AGE follows STATE


async def test_a_jobset_an_aiperfjob_controls_is_listed_once_as_the_cr(aiperf: Run, kube: FakeKube) -> None:
    kube.install_crd(build_crd(JOB_KIND))
    await submit(aiperf, kube, "op", "--operator")
    cr = kube.get(CR_API, JOB_KIND, NS, "op")
    assert cr is not None
    kube.create({"apiVersion": JS_API, "kind": "JobSet", "metadata": {
        "name": "aiperf-op", "namespace": NS, "labels": {"app.kubernetes.io/name": "aiperf"},
        "ownerReferences": [{"apiVersion": CR_API, "kind": JOB_KIND, "name": "op", "uid": cr["metadata"]["uid"],
                             "controller": True}]}, "spec": {"replicatedJobs": []}})
    result = await aiperf("kube", "list", *target(kube))
    assert [line.split()[:2] for line in result.out.splitlines()[1:]] == [["op", "Pending"]]


async def test_timeout_needs_watch(aiperf: Run, kube: FakeKube) -> None:
    result = await aiperf("kube", "list", "--timeout", "5", *target(kube))
    assert (result.code, result.err) == (2, "error: --timeout 5.0: only with --watch\n")


async def test_watch_ends_at_the_timeout_with_exit_0(aiperf: Run, kube: FakeKube) -> None:
    await submit(aiperf, kube, "demo")
    result = await aiperf("kube", "list", "--watch", "--timeout", "0.3", *target(kube))
    assert result.code == 0, result.err
    assert [line.split()[:2] for line in result.out.splitlines()] == [["NAME", "STATE"], ["demo", "Running"]]


@asynccontextmanager
async def watching(aiperf: Run, kube: FakeKube) -> AsyncIterator[Lines]:
    """`kube list --watch` (`watch_runs`) in a task, once AIPerfJob `first` (operator mode) is
    listed Pending and both watches (AIPerfJobs and JobSets) are open; stopped on exit."""
    kube.install_crd(build_crd(JOB_KIND))
    await submit(aiperf, kube, "first", "--operator")
    lines = Lines()
    async with await connect(kube.kubeconfig_path, None) as api:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: watch_runs(api, NS, emit=lines))
            assert await lines.wait_for("first", "Pending")
            await kube.wait_until(lambda: len(kube.store.watchers) == 2)
            yield lines
            tg.cancel_scope.cancel()


def cr_lists(kube: FakeKube) -> list[Any]:
    """The AIPerfJob collection reads that were lists, not watches."""
    cr_path = f"/apis/{CR_API}/namespaces/{NS}/aiperfjobs"
    return [r for r in kube.requests_for("GET", cr_path) if r.path == cr_path and r.query.get("watch") != "true"]


async def test_watch_prints_each_change_through_cut_and_expired_watches(aiperf: Run, kube: FakeKube) -> None:
    async with watching(aiperf, kube) as lines:
        kube.set_status(CR_API, JOB_KIND, NS, "first", {"phase": "Running", "requestsCompleted": 5,
                                                        "requestsTotal": 80})
        assert (await lines.wait_for("first", "Running"))[2] == "5/80"
        await submit(aiperf, kube, "direct", "--no-operator")
        assert await lines.wait_for("direct", "Running")

        assert kube.cut_watches() == 2  # half a line, then the connection drops: resume from the last rv
        kube.set_status(CR_API, JOB_KIND, NS, "first", {"phase": "Running", "requestsCompleted": 40,
                                                        "requestsTotal": 80})
        assert (await lines.wait_for("first", "Running", "40/80"))
        kube.set_status(JS_API, "JobSet", NS, "aiperf-direct",
                        {"conditions": [{"type": "Completed", "status": "True"}]})
        assert await lines.wait_for("direct", "Completed")

        # Expired: the history is gone when the watch comes back; a fresh list shows the changes.
        await kube.wait_until(lambda: len([w for w in kube.store.watchers if not w.cut]) == 2)
        assert kube.cut_watches() == 2
        kube.set_status(CR_API, JOB_KIND, NS, "first", {"phase": "Completed", "requestsCompleted": 80,
                                                        "requestsTotal": 80})
        kube.compact()  # before the watch comes back: no await since the cut
        await aiperf("kube", "delete", "direct", *target(kube))
        assert await lines.wait_for("first", "Completed", "80/80")
        assert await lines.wait_for("direct", "Deleted")
    rows = [line.split()[:2] for line in lines.lines]
    assert rows[0] == ["NAME", "STATE"] and rows.count(["first", "Completed"]) == 1
    cr_path = f"/apis/{CR_API}/namespaces/{NS}/aiperfjobs"
    watches = [r for r in kube.requests_for("GET", cr_path) if r.query.get("watch") == "true"]
    assert len(cr_lists(kube)) == 2  # the first list, and one more after the expired watch
    assert len(watches) >= 3 and all(w.query["resourceVersion"] for w in watches)


async def test_watch_lists_again_after_a_504_error_event(aiperf: Run, kube: FakeKube) -> None:
    # Issue 23, item 9: a watch ERROR other than 410 (a lagging apiserver's 504) is not fatal.
    async with watching(aiperf, kube) as lines:
        assert kube.fail_watches() == 2
        kube.set_status(CR_API, JOB_KIND, NS, "first", {"phase": "Running", "requestsCompleted": 5,
                                                        "requestsTotal": 80})
        assert (await lines.wait_for("first", "Running"))[2] == "5/80"
    assert len(cr_lists(kube)) == 2  # the first list, and one more after the ERROR event
