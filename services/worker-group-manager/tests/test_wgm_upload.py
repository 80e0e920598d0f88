"""Kubernetes, `--export-level raw`: the worker-group-manager uploads its pod's raw parts to the
controller's api and accepts an upload only when the api acknowledges the size it sent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from aiperf.messages import RawPart, RawRecordsUploaded, UploadRawRecords
from aiperf.runtime import GiveUp
from aiperf.worker_group_manager.download import RetryPolicy, api_url_from_env
from aiperf.worker_group_manager.service import WorkerGroupManager
from aiperf.worker_group_manager.upload import RawUploader
from tests._wgm_server import UploadServer, serving_uploads

pytestmark = pytest.mark.anyio

TOKEN = "t" * 64
FAST = RetryPolicy(deadline_s=10.0, first_delay_s=0.001, max_delay_s=0.01)


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as http:
        yield http


def parts(folder: Path, sizes: dict[str, int]) -> list[RawPart]:
    """Part files `<name>.jsonl` of about `size` bytes each, as their record-processors acknowledged them."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, lines in sizes.items():
        path = folder / f"{name}.jsonl"
        path.write_bytes(b"".join(b'{"n": %d, "pad": "%s"}\n' % (i, b"x" * (i % 50)) for i in range(lines)))
        out.append(RawPart(name=path.name, size=path.stat().st_size, records=lines, path=str(path)))
    return out


def manager(session: aiohttp.ClientSession, *, url: str | None, token: str | None = TOKEN,
            retry: RetryPolicy = FAST) -> WorkerGroupManager:
    return WorkerGroupManager(service_id="worker-group-manager-g1", group_id="g1", members=[],
                              raw_uploader=RawUploader(session=session, token=token, retry=retry),
                              api_url=url)


async def test_every_part_is_uploaded_and_acknowledged(session: aiohttp.ClientSession, tmp_path: Path) -> None:
    sent = parts(tmp_path / "raw", {"record-processor-g1-0": 3000, "record-processor-g1-1": 0})
    async with serving_uploads(UploadServer(token=TOKEN, busy=2)) as api:  # two "not yet" answers first
        reply = await manager(session, url=api.url).handle(UploadRawRecords(request_id="r", parts=sent))
    assert isinstance(reply, RawRecordsUploaded)
    assert [(p.name, p.size, p.records) for p in reply.parts] == [(p.name, p.size, p.records) for p in sent]
    for part in sent:
        assert api.received[part.name] == Path(part.path).read_bytes()


async def test_a_short_acknowledgement_fails_the_upload(session: aiohttp.ClientSession, tmp_path: Path) -> None:
    sent = parts(tmp_path / "raw", {"record-processor-g1-0": 100})
    async with serving_uploads(UploadServer(token=TOKEN, ack_delta=-1)) as api:
        with pytest.raises(GiveUp, match=rf"record-processor-g1-0.jsonl: the controller acknowledged "
                                         rf"{sent[0].size - 1} bytes of the {sent[0].size} sent"):
            await manager(session, url=api.url).handle(UploadRawRecords(request_id="r", parts=sent))


async def test_a_part_that_is_not_its_acknowledged_size_is_not_sent(session: aiohttp.ClientSession,
                                                                    tmp_path: Path) -> None:
    (sent,) = parts(tmp_path / "raw", {"record-processor-g1-0": 10})
    grown = RawPart(name=sent.name, size=sent.size - 5, records=10, path=sent.path)
    async with serving_uploads(UploadServer(token=TOKEN)) as api:
        with pytest.raises(GiveUp, match=rf"has {sent.size} bytes but its record-processor acknowledged {sent.size - 5}"):
            await manager(session, url=api.url).handle(UploadRawRecords(request_id="r", parts=[grown]))
        missing = RawPart(name="record-processor-g1-9.jsonl", size=1, path=str(tmp_path / "nope.jsonl"))
        with pytest.raises(GiveUp, match="is missing in this pod"):
            await manager(session, url=api.url).handle(UploadRawRecords(request_id="r", parts=[missing]))
    assert api.hits == 0


async def test_a_refusal_is_final_and_names_the_status(session: aiohttp.ClientSession, tmp_path: Path) -> None:
    sent = parts(tmp_path / "raw", {"record-processor-g1-0": 10})
    async with serving_uploads(UploadServer(token="another run's token")) as api:
        with pytest.raises(GiveUp, match="HTTP 401"):
            await manager(session, url=api.url).handle(UploadRawRecords(request_id="r", parts=sent))
    assert api.hits == 1


async def test_an_unreachable_api_is_given_up_at_the_deadline(session: aiohttp.ClientSession,
                                                              tmp_path: Path) -> None:
    sent = parts(tmp_path / "raw", {"record-processor-g1-0": 10})
    async with serving_uploads(UploadServer(token=TOKEN)) as api:
        url = api.url  # nothing listens there once the server is gone
    with pytest.raises(GiveUp, match=r"not uploaded to .* after \d+ attempts in 0.2s"):
        await manager(session, url=url, retry=RetryPolicy(deadline_s=0.2, first_delay_s=0.01, max_delay_s=0.05)
                      ).handle(UploadRawRecords(request_id="r", parts=sent))


async def test_uploads_need_kubernetes_key_material_and_an_api(session: aiohttp.ClientSession, tmp_path: Path) -> None:
    sent = parts(tmp_path / "raw", {"record-processor-g1-0": 1})
    local = WorkerGroupManager(service_id="worker-group-manager-g0", group_id="g0", members=[])
    with pytest.raises(GiveUp, match="Kubernetes mode only"):
        await local.handle(UploadRawRecords(request_id="r", parts=sent))
    with pytest.raises(GiveUp, match="no run key material"):
        await manager(session, url="http://127.0.0.1:9", token=None).handle(UploadRawRecords(request_id="r", parts=sent))
    with pytest.raises(GiveUp, match="AIPERF_CONTROLLER_HOST is not set"):
        await manager(session, url=None).handle(UploadRawRecords(request_id="r", parts=sent))
    assert api_url_from_env({"AIPERF_CONTROLLER_HOST": "ctl.ns", "AIPERF_API_PORT": "9999"}) == "http://ctl.ns:9999"
