"""Operator mode in headless Chromium: the real results server (`python -m aiperf.results serve
--kubeconfig ...`) reads a running AIPerfJob from the fake Kubernetes API server (in this process,
on a background event loop), and the dashboard's job page follows it live over the job status
WebSocket; when the socket drops the page keeps updating by polling the status route."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from browser._fixture_app import LIVE, make_results_tree
from browser.conftest import Browser, child_env, free_port, wait_http

from aiperf.kube.crd import build_crd
from aiperf.kube.crd_model import API_GROUP, API_VERSION, JOB_KIND
from aiperf.testing.fake_kube import FakeKube

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

CR_API = f"{API_GROUP}/{API_VERSION}"
NS, NAME = LIVE


def job_status(completed: int, phase: str = "Running") -> dict[str, Any]:
    return {"phase": phase, "subPhase": "profiling", "currentPhase": "profiling",
            "phases": {"profiling": {"phaseName": "profiling", "phaseKind": "profiling", "phaseIndex": 0,
                                     "requestsCompleted": completed, "requestsFailed": 1, "requestsTotal": 40,
                                     "startTime": "2026-12-01T12:00:00Z"}},
            "workers": {"ready": 2, "total": 2}, "requestsCompleted": completed, "requestsTotal": 40}


class Cluster:
    """The fake API server on a portal's event loop; every call runs on that loop."""

    def __init__(self, portal: BlockingPortal, kube: FakeKube) -> None:
        self.portal, self.kube = portal, kube

    def set_status(self, status: dict[str, Any]) -> None:
        self.portal.call(lambda: self.kube.set_status(CR_API, JOB_KIND, NS, NAME, status))


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(FakeKube(namespaces=[NS])) as kube:
        body = {"apiVersion": CR_API, "kind": JOB_KIND, "metadata": {"name": NAME, "namespace": NS},
                "spec": {"benchmark": {
                    "models": ["m"], "endpoint": {"urls": ["http://llm.example:8000"], "type": "chat"},
                    "datasets": [{"type": "synthetic", "entries": 4, "prompts": {"isl": {"mean": 16}}}],
                    "phases": [{"type": "concurrency", "name": "profiling", "concurrency": 2, "requests": 40}],
                    "runtime": {"workers": 2}}}}
        portal.call(lambda: (kube.install_crd(build_crd(JOB_KIND)), kube.create(body)))
        cluster = Cluster(portal, kube)
        cluster.set_status(job_status(3))
        yield cluster


def start_server(base: Path, port: int, kubeconfig: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "aiperf.results", "serve", "--base", str(base), "--port", str(port),
                             "--layout", "volume", "--kubeconfig", kubeconfig],
                            env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", 60)
    except TimeoutError:
        proc.kill()
        raise RuntimeError(f"results server did not start: {proc.communicate()[1].decode()[-2000:]}") from None
    return proc


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    assert proc.returncode == 0, err.decode()[-2000:]


# Keeps the page's sockets reachable, so the test can drop them as a lost connection would.
TRACK_SOCKETS = """(() => {
  const Native = window.WebSocket;
  window.__sockets = [];
  window.WebSocket = class extends Native {
    constructor(...args) { super(...args); window.__sockets.push(this); }
  };
})();"""


@pytest.fixture
def tracked_sockets(browser: Browser) -> Iterator[None]:
    added = browser.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": TRACK_SOCKETS})
    try:
        yield
    finally:
        browser.driver.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", added)


def completed_cell(browser: Browser) -> str:
    return browser.text('#progress tr[data-phase="profiling"] td.completed')


def test_a_running_jobs_page_follows_the_cr_status_live_and_by_polling_once_the_socket_drops(
        browser: Browser, cluster: Cluster, tracked_sockets: None, tmp_path: Path) -> None:
    make_results_tree(tmp_path)  # its job bench/live has one run still going
    port = free_port()
    server = start_server(tmp_path, port, cluster.kube.kubeconfig_path)
    try:
        browser.console_errors()
        browser.open(f"http://127.0.0.1:{port}/dashboard/job?ns={NS}&name={NAME}")
        browser.wait(lambda d: d.find_element("id", "live").get_attribute("data-live") == "websocket", 20,
                     "the job status socket")
        browser.wait(lambda d: completed_cell(browser) == "3", 20, "the first snapshot")
        assert browser.text("#workers") == "2 ready of 2"
        cluster.set_status(job_status(17))
        browser.wait(lambda d: completed_cell(browser) == "17", 20, "the pushed status change")
        assert browser.attr("#live", "data-live") == "websocket"  # pushed, not polled
        browser.screenshot("dashboard-operator-job-live")
        assert not browser.console_errors()
        browser.driver.execute_script("for (const s of window.__sockets) s.close(4000, 'dropped by the test');")
        browser.wait(lambda d: d.find_element("id", "live").get_attribute("data-live") == "polling", 20,
                     "the fallback to polling")
        cluster.set_status(job_status(29))
        browser.wait(lambda d: completed_cell(browser) == "29", 20, "the polled status change")
        assert browser.attr("#live", "data-live") == "polling"
        cluster.set_status(job_status(40, phase="Completed"))
        browser.wait(lambda d: d.find_element("id", "phase").get_attribute("data-phase") == "Completed", 20,
                     "the terminal phase")
        browser.screenshot("dashboard-operator-job-polled")
        assert not browser.console_errors()
    finally:
        stop_server(server)
