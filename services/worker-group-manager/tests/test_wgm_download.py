"""Kubernetes mode: the worker-group-manager downloads the zstd dataset once per pod."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import anyio
import pytest

from aiperf.dataset import DATA_FILE, INDEX_FILE, Conversation, DatasetReader, Turn, write_dataset
from aiperf.messages import GroupReady, PrepareGroup, ProfileStart
from aiperf.runtime import GiveUp, UnknownCommand
from aiperf.worker_group_manager.download import (
    DatasetDownloader,
    PodDataset,
    RetryPolicy,
    dataset_url_from_env,
)
from aiperf.worker_group_manager.main import pod_dataset_dir
from aiperf.worker_group_manager.service import WorkerGroupManager
from tests._wgm_server import DatasetServer, serving

pytestmark = pytest.mark.anyio

FAST = RetryPolicy(deadline_s=10.0, first_delay_s=0.001, max_delay_s=0.01)


def conversations(n: int) -> list[Conversation]:
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "epsilon"]
    return [Conversation(id=f"c{i}", turns=[
        Turn(text=" ".join(rng.choice(words) for _ in range(rng.randint(5, 400))), input_tokens=i)])
        for i in range(n)]


@pytest.fixture
def controller_dataset(tmp_path: Path) -> Path:
    """The controller's dataset folder: `.dat` files and their `.zst` copies."""
    folder = tmp_path / "controller" / "dataset"
    write_dataset(folder, conversations(300), compress=True)
    return folder


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(auto_decompress=False) as s:
        yield s


def downloader(session: aiohttp.ClientSession, retry: RetryPolicy = FAST) -> DatasetDownloader:
    return DatasetDownloader(session=session, retry=retry, chunk_bytes=1000)


async def test_download_retries_503_then_decompresses_to_an_identical_mappable_copy(
        controller_dataset: Path, tmp_path: Path, session: aiohttp.ClientSession) -> None:
    async with serving(DatasetServer(folder=controller_dataset, busy=2)) as server:
        got = await downloader(session).download(server.url, tmp_path / "pod" / "dataset-g1")
    assert server.hits == {DATA_FILE: 3, INDEX_FILE: 3}  # two 503s each, then the file
    local = tmp_path / "pod" / "dataset-g1"
    assert got.directory == local and got.conversations == 300
    for name in (DATA_FILE, INDEX_FILE):
        assert (local / name).read_bytes() == (controller_dataset / name).read_bytes()
        assert not (local / f"{name}.tmp").exists()
    assert got.disk_bytes == sum((controller_dataset / n).stat().st_size for n in (DATA_FILE, INDEX_FILE))
    assert got.wire_bytes < got.disk_bytes  # it travelled compressed
    with DatasetReader(local) as reader, DatasetReader(controller_dataset) as original:
        assert reader.ids() == original.ids()
        assert reader.conversation_by_id("c299") == original.conversation_by_id("c299")


async def test_the_wgm_downloads_once_per_pod_and_replies_its_local_folder(
        controller_dataset: Path, tmp_path: Path, session: aiohttp.ClientSession) -> None:
    async with serving(DatasetServer(folder=controller_dataset, busy=1)) as server:
        pod = PodDataset(downloader=downloader(session), directory=tmp_path / "pod" / "dataset-g0",
                         default_url=server.url)
        wgm = WorkerGroupManager(service_id="worker-group-manager-g0", group_id="g0",
                                 members=["worker-g0-0"], pod_dataset=pod)
        replies: list[GroupReady] = []

        async def configure(rid: str) -> None:
            reply = await wgm.handle(PrepareGroup(request_id=rid, dataset_dir=str(controller_dataset)))
            assert isinstance(reply, GroupReady)
            replies.append(reply)

        async with anyio.create_task_group() as tg:  # a repeated ask must not download twice
            tg.start_soon(configure, "a")
            tg.start_soon(configure, "b")
        await configure("c")
    assert server.hits == {DATA_FILE: 2, INDEX_FILE: 2}  # one 503 each, then one download
    assert [r.dataset_dir for r in replies] == [str(tmp_path / "pod" / "dataset-g0")] * 3
    assert replies[0].conversations == 300 and replies[0].group_id == "g0"


async def test_the_commands_dataset_url_overrides_the_environment_default(
        controller_dataset: Path, tmp_path: Path, session: aiohttp.ClientSession) -> None:
    async with serving(DatasetServer(folder=controller_dataset)) as server:
        pod = PodDataset(downloader=downloader(session), directory=tmp_path / "d",
                         default_url="http://127.0.0.1:9/api/dataset")  # nothing listens there
        wgm = WorkerGroupManager(service_id="wgm", group_id="g0", members=[], pod_dataset=pod)
        reply = await wgm.handle(PrepareGroup(request_id="a", dataset_dir="/elsewhere", dataset_url=server.url))
    assert isinstance(reply, GroupReady) and reply.dataset_dir == str(tmp_path / "d")


async def test_locally_the_shared_folder_is_replied_unchanged(controller_dataset: Path) -> None:
    wgm = WorkerGroupManager(service_id="wgm", group_id="g0", members=["worker-g0-0"])
    reply = await wgm.handle(PrepareGroup(request_id="a", dataset_dir=str(controller_dataset)))
    assert reply == GroupReady(dataset_dir=str(controller_dataset), group_id="g0", members=["worker-g0-0"],
                               conversations=300)
    with pytest.raises(GiveUp, match="cannot be opened"):
        await wgm.handle(PrepareGroup(request_id="b", dataset_dir="/no/such/dir"))
    with pytest.raises(UnknownCommand, match="does not handle ProfileStart"):
        await wgm.handle(ProfileStart(request_id="c"))


async def test_an_api_that_stays_unavailable_gives_up_at_the_deadline(
        controller_dataset: Path, tmp_path: Path, session: aiohttp.ClientSession) -> None:
    retry = RetryPolicy(deadline_s=0.5, first_delay_s=0.001, max_delay_s=0.01)  # >= 2 tries on a loaded host
    async with serving(DatasetServer(folder=controller_dataset, busy=10**9)) as server:
        with pytest.raises(GiveUp, match=r"not available at .*dataset.dat after \d+ attempts.*HTTP 503"):
            await downloader(session, retry).download(server.url, tmp_path / "d")
        assert server.hits[DATA_FILE] >= 2
    with pytest.raises(GiveUp, match="ClientConnectorError"):
        await downloader(session, retry).download(server.url, tmp_path / "d")  # refused now


async def test_a_final_http_error_is_not_retried(
        controller_dataset: Path, tmp_path: Path, session: aiohttp.ClientSession) -> None:
    async with serving(DatasetServer(folder=controller_dataset, status=404)) as server:
        with pytest.raises(GiveUp, match="HTTP 404: nope"):
            await downloader(session).download(server.url, tmp_path / "d")
    assert server.hits == {DATA_FILE: 1}


async def test_a_truncated_stream_leaves_no_file(
        controller_dataset: Path, tmp_path: Path, session: aiohttp.ClientSession) -> None:
    async with serving(DatasetServer(folder=controller_dataset, truncate=50)) as server:
        with pytest.raises(GiveUp, match="truncated"):
            await downloader(session).download(server.url, tmp_path / "d")
    assert list((tmp_path / "d").iterdir()) == []


async def test_a_pod_without_any_url_gives_up_clearly(tmp_path: Path, session: aiohttp.ClientSession) -> None:
    pod = PodDataset(downloader=downloader(session), directory=tmp_path / "d", default_url=None)
    with pytest.raises(GiveUp, match="AIPERF_CONTROLLER_HOST is not set"):
        await pod.ensure(None)


def test_the_default_url_comes_from_the_pod_environment() -> None:
    assert dataset_url_from_env({}) is None
    assert (dataset_url_from_env({"AIPERF_CONTROLLER_HOST": "run-controller-0-0.run"})
            == "http://run-controller-0-0.run:9090/api/dataset")
    assert (dataset_url_from_env({"AIPERF_CONTROLLER_HOST": "fd00::1", "AIPERF_API_PORT": "8000"})
            == "http://[fd00::1]:8000/api/dataset")
    with pytest.raises(GiveUp, match="AIPERF_API_PORT"):
        dataset_url_from_env({"AIPERF_CONTROLLER_HOST": "h", "AIPERF_API_PORT": "http"})


def test_the_pod_copy_never_lands_in_the_controller_folder() -> None:
    assert pod_dataset_dir("/aiperf/artifacts", "g3") == Path("/aiperf/artifacts/dataset-g3")


async def test_build_lists_the_members_of_a_short_last_group(tmp_path: Path) -> None:
    from contextlib import AsyncExitStack

    from aiperf.config import CommsOptions, RunConfig, ServiceCounts
    from aiperf.messages import ServiceType
    from aiperf.runtime import ServiceContext, UserError
    from aiperf.worker_group_manager.main import build

    config = RunConfig(run_id="r", comms=CommsOptions(ipc_dir=str(tmp_path)), services=ServiceCounts(
        worker_groups=3, workers_per_group=4, last_group_workers=1, record_processors_per_group=1))

    def context(group: str) -> ServiceContext:
        return ServiceContext(config=config, service_type=ServiceType.WORKER_GROUP_MANAGER,
                              service_id=f"worker-group-manager-{group}", group_id=group,
                              zmq=None, addressing=None)

    async with AsyncExitStack() as stack:
        last = await build(context("g2"), stack)
        first = await build(context("g0"), stack)
        with pytest.raises(UserError, match="--group-id 'g3'"):
            await build(context("g3"), stack)
    assert isinstance(last, WorkerGroupManager) and isinstance(first, WorkerGroupManager)
    assert last.members == ["worker-g2-0", "record-processor-g2-0"]
    assert len(first.members) == 5
