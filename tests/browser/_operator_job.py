"""Operator mode for the browser tests: the fake Kubernetes API server with one running
AIPerfJob (``bench/live``, in this process on a background event loop), the real results server
reading it (`python -m aiperf.results_server.main --kubeconfig ...`), and a script that keeps the page's
WebSockets reachable so a test can drop them."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal
from browser._fixture_app import LIVE
from browser.conftest import Browser, child_env, wait_http

from aiperf.crd.generator import build_crd
from aiperf.crd.model import API_GROUP, API_VERSION, JOB_KIND
from aiperf.testing.fake_kube import FakeKube

CR_API = f"{API_GROUP}/{API_VERSION}"
NS, NAME = LIVE
STARTED = (datetime.now(UTC) - timedelta(seconds=5)).isoformat(timespec="seconds").replace("+00:00", "Z")


def job_status(completed: int, phase: str = "Running") -> dict[str, Any]:
    return {"phase": phase, "subPhase": "profiling", "currentPhase": "profiling",
            "phases": {"profiling": {"phaseName": "profiling", "phaseKind": "profiling", "phaseIndex": 0,
                                     "requestsCompleted": completed, "requestsFailed": 1, "requestsTotal": 40,
                                     "startTime": STARTED}},
            "workers": {"ready": 2, "total": 2}, "requestsCompleted": completed, "requestsTotal": 40}


class Cluster:
    """The fake API server on a portal's event loop; every call runs on that loop."""

    def __init__(self, portal: BlockingPortal, kube: FakeKube) -> None:
        self.portal, self.kube = portal, kube

    def set_status(self, status: dict[str, Any]) -> None:
        self.portal.call(lambda: self.kube.set_status(CR_API, JOB_KIND, NS, NAME, status))


@contextmanager
def open_cluster() -> Iterator[Cluster]:
    """The fake API server with the AIPerfJob ``bench/live`` at 3 of 40 requests."""
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
    """The results server over `base` reading the cluster of `kubeconfig`, once it answers."""
    proc = subprocess.Popen([sys.executable, "-m", "aiperf.results_server.main", "--base", str(base), "--port", str(port),
                             "--layout", "volume", "--kubeconfig", kubeconfig],
                            env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", 60)
    except TimeoutError:
        proc.kill()
        raise RuntimeError(f"results server did not start: {proc.communicate()[1].decode()[-2000:]}") from None
    return proc


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM; it must exit 0 (open sockets closed first)."""
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


@contextmanager
def tracked_sockets(browser: Browser) -> Iterator[None]:
    """Pages opened meanwhile keep their WebSockets in ``window.__sockets``."""
    added = browser.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": TRACK_SOCKETS})
    try:
        yield
    finally:
        browser.driver.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", added)


def completed_cell(browser: Browser) -> str:
    """The profiling row's completed count, read in one script (the page rebuilds the rows on
    every snapshot, so an element found first could be stale when read)."""
    return str(browser.driver.execute_script(
        "const c = document.querySelector('#progress tr[data-phase=\"profiling\"] td.completed');"
        "return c ? c.textContent : '';"))

