"""A secret canary: a unique API key, header value and URL credential given to a local run and to
`kube generate`; no file, log or manifest the run produces may contain any of them."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from e2e._harness import aiperf, env

from aiperf.mock_server.testing import running_mock

pytestmark = pytest.mark.slow


def _canaries() -> dict[str, str]:
    tag = uuid.uuid4().hex[:12]
    return {"key": f"sk-key-{tag}", "header": f"hdr-{tag}", "user": f"user{tag}", "password": f"pw{tag}"}


def _leaks(root: Path, secrets: dict[str, str]) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            hits += [f"{path}: {name}" for name, value in secrets.items() if value.encode() in data]
    return hits


def test_a_local_run_writes_no_secret(tmp_path: Path) -> None:
    secrets = _canaries()
    with running_mock("--ttft-ms", "1", "--itl-ms", "1", "--output-tokens", "4") as server:
        host = server.url.removeprefix("http://")
        run = aiperf("profile", "--model", "mock", "--url", f"http://{secrets['user']}:{secrets['password']}@{host}",
                     "--streaming", "--concurrency", "2", "--request-count", "10",
                     "--header", f"X-Tenant:{secrets['header']}", "--log-level", "debug",
                     artifacts=tmp_path / "a")
    assert run.code == 0, run.stderr
    assert _leaks(tmp_path / "a", secrets) == []
    for name, value in secrets.items():
        assert value not in run.stdout + run.stderr, name


def test_url_credentials_become_an_authorization_header(tmp_path: Path) -> None:
    from aiperf.cli.benchmark_flags import build_benchmark
    from aiperf.cli.profile_options import LocalFlags, ProfileFlags

    built = build_benchmark(ProfileFlags(model=["m"], url=["http://ann:s%3Acret@h:8000/v1"]), LocalFlags(ui="none"))
    assert built.benchmark.endpoint.url == "http://h:8000/v1"
    assert built.benchmark.endpoint.header_names == ["Authorization"]
    assert built.secrets.headers == {"Authorization": "Basic YW5uOnM6Y3JldA=="}  # ann:s:cret


@pytest.mark.parametrize("credential", ["url", "api-key"])
def test_kube_generate_writes_no_secret(tmp_path: Path, credential: str) -> None:
    secrets = _canaries()
    url = f"http://{secrets['user']}:{secrets['password']}@vllm:8000" if credential == "url" else "http://vllm:8000"
    key = ["--api-key", secrets["key"], "--api-key-secret", "llm/key"] if credential == "api-key" else []
    args = ["kube", "generate", "--name", "canary", "-n", "bench", "--model", "m", "--url", url, *key,
            "--header", f"X-Tenant:{secrets['header']}", "--headers-secret", "llm/headers",
            "--kubeconfig", str(tmp_path / "none")]
    done = subprocess.run([sys.executable, "-m", "aiperf.cli", *args], env=env(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    for name, value in secrets.items():
        assert value not in done.stdout + done.stderr, name
    assert "X-Tenant" in done.stdout  # the names, never the values
    if credential == "url":
        assert "Authorization" in done.stdout
