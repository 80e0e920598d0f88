"""Every row of the results server's route table and every edge case of the reference
(aiperf-kubernetes-flow.md, "HTTP API", "Edge cases"), through Litestar's test client over a
real results volume written by the index's writer API."""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from litestar import get
from litestar.testing import TestClient

from aiperf.results import disk
from aiperf.results.app import create_app
from aiperf.results.index import ResultsIndex
from aiperf.testing.stored_runs import FILES, complete

NS, JOB = "bench", "run"
OLD, NEW = "1700000000111111", "1700000100222222"
API = "/api/v1/results"


@pytest.fixture
def volume(tmp_path: Path) -> Path:
    async def fill() -> None:
        index = ResultsIndex(tmp_path, keep=10)
        await complete(index, NS, JOB, OLD, uid="u-old", files={"profile_export_aiperf.json": b'{"old": true}'})
        await complete(index, NS, JOB, NEW, uid="u-new")
        await index.record_created(NS, JOB, "1700000200", uid="u-going", created_at="2023-11-14T22:50:00Z")
        await index.record_phase(NS, JOB, "1700000200", uid="u-going", phase="Running")
        await complete(index, "other", "sweep-1", OLD, uid="u-s")

    anyio.run(fill)
    (tmp_path / "secret.txt").write_text("top secret")
    return tmp_path


@pytest.fixture
def client(volume: Path) -> Iterator[TestClient[Any]]:
    with TestClient(create_app(ResultsIndex(volume, keep=10))) as test_client:
        yield test_client


def error(response: Any, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"status_code", "detail"} and body["status_code"] == status
    return str(body["detail"])


def test_healthz(client: TestClient[Any]) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}


def test_the_job_list(client: TestClient[Any]) -> None:
    assert client.get(API).json() == {"jobs": [
        {"namespace": NS, "name": JOB, "runCount": 3, "latestEpoch": NEW, "phase": "Running"},
        {"namespace": "other", "name": "sweep-1", "runCount": 1, "latestEpoch": OLD, "phase": "Completed"}]}


def test_the_run_history_is_newest_first(client: TestClient[Any]) -> None:
    body = client.get(f"{API}/{NS}/{JOB}/runs").json()
    assert (body["namespace"], body["name"], body["latestEpoch"]) == (NS, JOB, NEW)
    assert [(r["epoch"], r["phase"]) for r in body["runs"]] == [("1700000200", "Running"), (NEW, "Completed"),
                                                                 (OLD, "Completed")]
    going, new, _ = body["runs"]
    assert going["files"] == [] and going["createdAt"] == "2023-11-14T22:50:00Z" and going["completedAt"] is None
    assert new["files"] == [{"name": n, "size": len(d)} for n, d in sorted(FILES.items())]
    assert new["uid"] == "u-new" and new["completedAt"] == "2023-11-14T22:20:00Z"
    assert "no stored runs" in error(client.get(f"{API}/{NS}/nothing/runs"), 404)


@pytest.mark.parametrize("path", [f"{API}/{NS}/{JOB}", f"{API}/{NS}/{JOB}.zip", f"{API}/{NS}/{JOB}/latest",
                                  f"{API}/{NS}/{JOB}/profile_export_aiperf.json", f"{API}/{NS}/nothing",
                                  f"{API}/{NS}/nothing/inputs.json"])
def test_the_unpinned_forms_answer_409(client: TestClient[Any], path: str) -> None:
    assert "explicit run epoch" in error(client.get(path), 409)


def test_a_pinned_run_lists_its_files(client: TestClient[Any]) -> None:
    body = client.get(f"{API}/{NS}/{JOB}/runs/{OLD}").json()
    assert body == {"namespace": NS, "name": JOB, "epoch": OLD, "phase": "Completed", "uid": "u-old",
                    "createdAt": "2023-11-14T22:13:20Z", "completedAt": "2023-11-14T22:20:00Z", "latest": False,
                    "files": [{"name": "profile_export_aiperf.json", "size": 13}]}
    assert client.get(f"{API}/{NS}/{JOB}/runs/{NEW}").json()["latest"] is True
    assert client.get(f"{API}/{NS}/{JOB}/runs/1700000200").json()["phase"] == "Running"
    assert "no run" in error(client.get(f"{API}/{NS}/{JOB}/runs/1700000300"), 404)


def test_a_pinned_zip_holds_the_runs_files(client: TestClient[Any]) -> None:
    response = client.get(f"{API}/{NS}/{JOB}/runs/{NEW}.zip")
    assert response.status_code == 200 and response.headers["content-type"] == "application/zip"
    assert f'filename="{JOB}-{NEW}.zip"' in response.headers["content-disposition"]
    archive = zipfile.ZipFile(io.BytesIO(response.content))
    assert {n: archive.read(n) for n in archive.namelist()} == FILES
    assert "Running" in error(client.get(f"{API}/{NS}/{JOB}/runs/1700000200.zip"), 409)
    assert "no run" in error(client.get(f"{API}/{NS}/{JOB}/runs/1700000300.zip"), 404)


@pytest.mark.parametrize(("name", "media"), [("profile_export_aiperf.json", "application/json"),
                                             ("profile_export_aiperf.csv", "text/csv"),
                                             ("profile_export.jsonl", "application/x-ndjson")])
def test_a_pinned_file_with_its_media_type(client: TestClient[Any], name: str, media: str) -> None:
    response = client.get(f"{API}/{NS}/{JOB}/runs/{NEW}/{name}")
    assert response.status_code == 200 and response.content == FILES[name]
    assert response.headers["content-type"].split(";")[0] == media


def test_a_missing_file_or_a_marker_is_404(client: TestClient[Any]) -> None:
    assert "no file" in error(client.get(f"{API}/{NS}/{JOB}/runs/{OLD}/inputs.json"), 404)
    assert "invalid file name" in error(client.get(f"{API}/{NS}/{JOB}/runs/{OLD}/{disk.RUN_MARKER}"), 422)


@pytest.mark.parametrize("epoch", ["latest", "1", "17000000001", "1700000000-abcdef01", "-21620277", "0x1700000000",
                                   "１７００００００００", "1700000000%20", "%2e%2e", "1700000000.zip.zip"])
def test_an_invalid_epoch_is_422_before_any_disk_access(epoch: str) -> None:
    class Untouchable:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"the source was used: {name}")

    with TestClient(create_app(Untouchable())) as client:  # type: ignore[arg-type]
        for path in (f"{API}/{NS}/{JOB}/runs/{epoch}", f"{API}/{NS}/{JOB}/runs/{epoch}.zip",
                     f"{API}/{NS}/{JOB}/runs/{epoch}/profile_export_aiperf.json"):
            assert "invalid run epoch" in error(client.get(path), 422), path


TRAVERSALS = [
    f"{API}/{NS}/{JOB}/runs/{NEW}/%2e%2e",
    f"{API}/{NS}/{JOB}/runs/{NEW}/%2e%2e%2fsecret.txt",
    f"{API}/{NS}/{JOB}/runs/{NEW}/%2E%2E%2F%2E%2E%2F%2E%2E%2Fsecret.txt",
    f"{API}/{NS}/{JOB}/runs/{NEW}/..%2f..%2f..%2fsecret.txt",
    f"{API}/{NS}/{JOB}/runs/{NEW}/%2fetc%2fpasswd",
    f"{API}/{NS}/{JOB}/runs/{NEW}/%5c..%5c..%5csecret.txt",
    f"{API}/{NS}/{JOB}/runs/{NEW}/%c0%ae%c0%ae%2fsecret.txt",
    f"{API}/{NS}/{JOB}/runs/{NEW}/%E2%80%A4%E2%80%A4%E2%88%95secret.txt",  # one-dot leaders, division slash
    f"{API}/{NS}/{JOB}/runs/{NEW}/%EF%BC%8E%EF%BC%8E%EF%BC%8Fsecret.txt",  # fullwidth dots and solidus
    f"{API}/{NS}/{JOB}/runs/{NEW}/secret.txt%00.json",
    f"{API}/{NS}/{JOB}/runs/{NEW}/.aiperf_run.json",
    f"{API}/%2e%2e/%2e%2e/runs/{NEW}/secret.txt",
    f"{API}/{NS}/%2e%2e/runs/{NEW}/secret.txt",
    f"{API}/%EF%BC%8E%EF%BC%8E/{JOB}/runs",
    f"{API}/{NS}/{JOB}%00/runs",
    f"{API}/{NS}/..%2f..%2f/runs",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_no_path_traversal(client: TestClient[Any], path: str) -> None:
    response = client.get(path)
    assert response.status_code in (404, 409, 422), (path, response.status_code)
    assert b"top secret" not in response.content


def test_a_symlink_out_of_the_run_directory_is_not_served(client: TestClient[Any], volume: Path) -> None:
    os.symlink(volume / "secret.txt", volume / NS / JOB / NEW / "evil.json")
    response = client.get(f"{API}/{NS}/{JOB}/runs/{NEW}/evil.json")
    assert response.status_code == 404 and b"top secret" not in response.content
    names = [f["name"] for f in client.get(f"{API}/{NS}/{JOB}/runs/{NEW}").json()["files"]]
    assert "evil.json" not in names


def test_latest_naming_a_missing_directory(client: TestClient[Any], volume: Path) -> None:
    disk.remove_tree(volume / NS / JOB / NEW)
    assert error(client.get(f"{API}/{NS}/{JOB}/runs/{NEW}"), 404)
    assert error(client.get(f"{API}/{NS}/{JOB}/runs/{NEW}/inputs.json"), 404)
    assert client.get(f"{API}/{NS}/{JOB}/runs/{OLD}/profile_export_aiperf.json").content == b'{"old": true}'


def test_a_same_second_resubmission_has_its_own_pinned_run(tmp_path: Path) -> None:
    first, second = "1700000000000001", "1700000000999999"

    async def fill() -> None:
        index = ResultsIndex(tmp_path, keep=10)
        await complete(index, NS, JOB, first, uid="a", files={"profile_export_aiperf.json": b"a"})
        await complete(index, NS, JOB, second, uid="b", files={"profile_export_aiperf.json": b"b"})

    anyio.run(fill)
    with TestClient(create_app(ResultsIndex(tmp_path, keep=10))) as client:
        assert client.get(f"{API}/{NS}/{JOB}/runs/{first}/profile_export_aiperf.json").content == b"a"
        assert client.get(f"{API}/{NS}/{JOB}/runs/{second}/profile_export_aiperf.json").content == b"b"


def test_extra_route_handlers_are_mounted_beside_the_api(volume: Path) -> None:
    @get("/", sync_to_thread=False)
    def index_page() -> dict[str, str]:
        return {"page": "dashboard"}

    with TestClient(create_app(ResultsIndex(volume, keep=10), extra_route_handlers=[index_page])) as client:
        assert client.get("/").json() == {"page": "dashboard"}
        assert json.loads(client.get(API).content)["jobs"]


def test_a_sweeps_stored_aggregate_is_served_under_api_v1_sweeps(tmp_path: Path) -> None:
    # Issue 23, item 6: the operator stores a sweep's aggregate as job `sweeps/<name>`, which
    # the job routes cannot name.
    async def fill() -> None:
        index = ResultsIndex(tmp_path, keep=10)
        await complete(index, NS, "sweeps/sw", OLD, uid="u-sw", files={"aggregate.json": b'{"sweep": 1}',
                                                                       "profile_export_aiperf_sweep.csv": b"label,\n"})

    anyio.run(fill)
    with TestClient(create_app(ResultsIndex(tmp_path, keep=10))) as client:
        listed = client.get("/api/v1/sweeps").json()["sweeps"]
        assert [(s["namespace"], s["name"], s["latestEpoch"]) for s in listed] == [(NS, "sw", OLD)]
        runs = client.get(f"/api/v1/sweeps/{NS}/sw/runs").json()
        assert runs["name"] == "sw" and [r["epoch"] for r in runs["runs"]] == [OLD]
        run = client.get(f"/api/v1/sweeps/{NS}/sw/runs/{OLD}").json()
        assert run["latest"] is True and {f["name"] for f in run["files"]} >= {"aggregate.json"}
        assert client.get(f"/api/v1/sweeps/{NS}/sw/runs/{OLD}/aggregate.json").json() == {"sweep": 1}
        archive = client.get(f"/api/v1/sweeps/{NS}/sw/runs/{OLD}.zip")
        assert archive.headers["content-disposition"] == f'attachment; filename="sw-{OLD}.zip"'
        assert "aggregate.json" in zipfile.ZipFile(io.BytesIO(archive.content)).namelist()
        assert "no stored runs of sweep bench/nope" in error(client.get(f"/api/v1/sweeps/{NS}/nope/runs"), 404)
        error(client.get(f"/api/v1/sweeps/{NS}/.hidden/runs"), 422)
        error(client.get(f"{API}/{NS}/sweeps/runs"), 404)  # the job routes never reach it
        assert [j["name"] for j in client.get(API).json()["jobs"]] == []  # not a job
    # A volume whose index went (a new results server, a lost sqlite file) is scanned again: the
    # stored sweep is found under <ns>/sweeps/<name>/ like a job's runs under <ns>/<name>/.
    (tmp_path / disk.INDEX_FILE).unlink()
    with TestClient(create_app(ResultsIndex(tmp_path, keep=10))) as client:
        listed = client.get("/api/v1/sweeps").json()["sweeps"]
        assert [(s["namespace"], s["name"], s["latestEpoch"]) for s in listed] == [(NS, "sw", OLD)]
        assert client.get(API).json()["jobs"] == []
