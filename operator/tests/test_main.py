"""The operator process as deployed: `--help`, a one-line error without a cluster, and a real
run from a kubeconfig against the fake API server with /healthz and /metrics served, stopped
cleanly by SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import aiohttp
import anyio
import pytest
from _harness import NS, job, phase

from aiperf.operator.main import main
from aiperf.testing.fake_kube import FakeKube


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0 and "--kubeconfig" in capsys.readouterr().out


def test_no_cluster_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: os.PathLike[str]) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(["--kubeconfig", f"{tmp_path}/missing"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing not found" in err


def test_a_bad_keep_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: os.PathLike[str]) -> None:
    monkeypatch.setenv("AIPERF_RESULTS_KEEP", "0")
    assert main(["--results-dir", str(tmp_path)]) == 2
    assert "AIPERF_RESULTS_KEEP" in capsys.readouterr().err


async def _get(http: aiohttp.ClientSession, port: int) -> str:
    async with http.get(f"http://127.0.0.1:{port}/metrics") as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return await response.text()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.anyio
@pytest.mark.slow
async def test_the_process_reconciles_and_serves_health_and_metrics(kube: FakeKube) -> None:
    health, metrics = _free_port(), _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    proc = subprocess.Popen(  # noqa: ASYNC220 - a child process the test owns and waits for below
        [sys.executable, "-m", "aiperf.operator.main", "--kubeconfig", kube.kubeconfig_path, "-n", NS,
         "--standalone", "--health-port", str(health), "--metrics-port", str(metrics), "--resync-interval", "0.5"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        kube.create(job())
        await kube.wait_until(lambda: phase(kube) == "Initializing", timeout=60)
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{health}/healthz") as response:
                assert response.status == 200
            with anyio.fail_after(20):  # the create handler counts itself after its last write
                while 'aiperf_operator_reconciles_total{handler="create"}' not in (text := await _get(http, metrics)):
                    await anyio.sleep(0.1)
        assert 'aiperf_operator_reconciles_total{handler="create"} 1' in text
        assert 'aiperf_operator_runs_total{phase="Initializing"} 1' in text
        assert "# TYPE aiperf_operator_errors_total counter" in text
    finally:
        proc.send_signal(signal.SIGTERM)
        code = await anyio.to_thread.run_sync(proc.wait, 30)
        stderr = proc.stderr.read().decode() if proc.stderr else ""
        proc.stderr and proc.stderr.close()
    assert code == 0, stderr[-2000:]


def test_startup_thresholds_come_from_flags_else_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from aiperf.operator.main import build_parser

    args = build_parser().parse_args([])
    assert (args.startup_warn_after, args.startup_fail_after, args.startup_unschedulable_fail_after) == (60, 300, 600)
    monkeypatch.setenv("AIPERF_OPERATOR_STARTUP_FAIL_AFTER", "120")
    assert build_parser().parse_args([]).startup_fail_after == 120
    assert build_parser().parse_args(["--startup-fail-after", "30"]).startup_fail_after == 30
    monkeypatch.setenv("AIPERF_OPERATOR_STARTUP_FAIL_AFTER", "soon")
    with pytest.raises(SystemExit) as exc:
        build_parser()
    assert exc.value.code == 2 and "AIPERF_OPERATOR_STARTUP_FAIL_AFTER='soon'" in capsys.readouterr().err
