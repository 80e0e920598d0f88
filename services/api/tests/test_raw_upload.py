"""`PUT /api/raw/{name}` over real HTTP on 127.0.0.1: a worker pod's raw part lands atomically
under `<artifact_dir>/raw/`, acknowledged with the bytes received; without the run's bearer
token, with a name that is not one plain part name, or on a run without key material, nothing
is written."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from yarl import URL

from aiperf.comms import RAW_UPLOAD_TOKEN, CurveKeys
from tests._api_fakes import Running, Serving

pytestmark = pytest.mark.anyio

TOKEN = CurveKeys.generate().http_token(RAW_UPLOAD_TOKEN)
PART = b'{"metadata": {"credit_num": 0}, "status": 200, "responses": []}\n' * 500


async def _put(run: Running, name: str, body: bytes, token: str | None = TOKEN) -> tuple[int, object]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with run.http.put(f"{run.base}/api/raw/{name}", data=body, headers=headers) as response:
        return response.status, await response.json(content_type=None)


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


async def test_a_part_is_stored_and_its_size_acknowledged(serving: Serving) -> None:
    async with serving(kubernetes=True, upload_token=TOKEN) as run:
        status, body = await _put(run, "record-processor-g1-0.jsonl", PART)
        assert (status, body) == (201, {"name": "record-processor-g1-0.jsonl", "size": len(PART)})
        # a retried upload replaces the part; no staging file is left behind
        status, body = await _put(run, "record-processor-g1-0.jsonl", PART[:100])
        assert status == 201 and body == {"name": "record-processor-g1-0.jsonl", "size": 100}
    assert (run.artifact_dir / "raw" / "record-processor-g1-0.jsonl").read_bytes() == PART[:100]
    assert _files(run.artifact_dir) == ["raw/record-processor-g1-0.jsonl"]


@pytest.mark.parametrize("token", [None, "", "0" * 64, TOKEN[:-1], TOKEN + "0",
                                   CurveKeys.generate().http_token(RAW_UPLOAD_TOKEN)])
async def test_a_missing_or_wrong_token_is_refused(serving: Serving, token: str | None) -> None:
    async with serving(kubernetes=True, upload_token=TOKEN) as run:
        status, body = await _put(run, "record-processor-g0-0.jsonl", PART, token=token)
    assert status == 401, body
    assert not (run.artifact_dir / "raw").exists()


async def test_a_run_without_key_material_refuses_every_upload(serving: Serving) -> None:
    async with serving(kubernetes=True, upload_token=None) as run:
        status, body = await _put(run, "record-processor-g0-0.jsonl", PART, token="anything")
    assert status == 403 and "no key material" in str(body), body
    assert not (run.artifact_dir / "raw").exists()


@pytest.mark.parametrize("name", ["..", ".hidden.jsonl", "..%2F..%2Fevil.jsonl", "..%2Fprofile_export_aiperf.json",
                                  "a%2Fb.jsonl", "a%5Cb.jsonl", "part.json", "part.jsonl%00.txt",
                                  "%2E%2E%2Fx.jsonl", "x" * 200 + ".jsonl"])
async def test_a_name_that_is_not_one_plain_part_is_refused(serving: Serving, tmp_path: Path, name: str) -> None:
    async with serving(kubernetes=True, upload_token=TOKEN) as run:
        async with run.http.put(URL(f"{run.base}/api/raw/{name}", encoded=True), data=PART,
                                headers={"Authorization": f"Bearer {TOKEN}"}) as response:
            status = response.status
    # a decoded separator leaves the route (404); anything else reaches the name check (400)
    assert status == (404 if "%2F" in name else 400), (name, status)
    assert _files(tmp_path) == [], _files(tmp_path)  # nothing written anywhere under the test's folder


async def test_a_body_shorter_than_its_content_length_leaves_no_part(serving: Serving) -> None:
    """A sender cut off mid-body: the staging file goes, no part appears."""
    async with serving(kubernetes=True, upload_token=TOKEN) as run:
        host, port = run.base.removeprefix("http://").split(":")
        stream = await anyio.connect_tcp(host, int(port))
        head = (f"PUT /api/raw/record-processor-g0-0.jsonl HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {TOKEN}\r\nContent-Length: {len(PART)}\r\n\r\n").encode()
        await stream.send(head + PART[:1000])
        await stream.aclose()
        status, _ = await _put(run, "record-processor-g0-1.jsonl", b"{}\n")  # the server is still fine
        assert status == 201
    assert _files(run.artifact_dir) == ["raw/record-processor-g0-1.jsonl"]
