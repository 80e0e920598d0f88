"""The dashboard in headless Chromium (one browser for the whole file: its start is most of the cost).

History mode, over the fixture results server with two real runs (data/run1, data/run2: exports
of `aiperf profile` against the mock server): pages load without console errors, charts hold one
point per record (or per bin/percentile/error type), the comparison overlays both runs, and a
dropped progress socket falls back to polling. Live mode: the real CLI runs the mock server's
benchmark, the api service serves /dashboard, and the job page follows the run over the progress
WebSocket until its phase cell reads ``done``, without a reload. Operator mode: the results server
reads a running AIPerfJob from the fake API server and the job page follows its status over the
job status WebSocket, then by polling once the socket drops."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from browser._fixture_app import (
    DATA,
    EPOCHS,
    HISTORY,
    LIVE,
    SWEEP,
    SWEEP_EPOCH,
    SWEEP_THROUGHPUT,
    make_results_tree,
)
from browser._operator_job import (
    NAME,
    NS,
    Cluster,
    completed_cell,
    job_status,
    start_server,
    stop_server,
    tracked_sockets,
)
from browser.conftest import Browser, child_env, free_port, wait_http

from aiperf.mock_server.testing import running_mock

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

THROUGHPUT_BINS = 20
PERCENTILES = 9
DISTRIBUTIONS = {"ttft": "time_to_first_token", "itl": "inter_token_latency", "latency": "request_latency"}


def records(run: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / run / "profile_export.jsonl").read_text().splitlines() if line]


def with_metric(recs: list[dict[str, Any]], tag: str) -> int:
    return sum(1 for r in recs if isinstance(r.get("metrics", {}).get(tag, {}).get("value"), int | float))


def error_types(recs: list[dict[str, Any]]) -> int:
    return len({(r["error"].get("code"), r["error"].get("type")) for r in recs if r.get("error")})


def points(browser: Browser, chart_id: str) -> int:
    browser.wait(lambda d: d.find_element("id", chart_id).get_attribute("data-rendered"), 10, f"{chart_id} drawn")
    return int(browser.attr(f"#{chart_id}", "data-points") or -1)


def assert_no_console_errors(browser: Browser, page: str) -> None:
    errors = browser.console_errors()
    assert not errors, f"console errors on {page}: {errors}"


def test_job_list_shows_jobs_with_phase(browser: Browser, results_server: str) -> None:
    browser.console_errors()
    browser.open(results_server + "/")
    rows = browser.driver.find_elements("css selector", "#jobs tbody tr")
    by_name = {(r.get_attribute("data-ns"), r.get_attribute("data-name")): r for r in rows}
    assert set(by_name) == {HISTORY, LIVE}
    history = by_name[HISTORY].find_elements("tag name", "td")
    assert history[2].text == "2" and history[3].text == str(EPOCHS[1])
    assert by_name[HISTORY].find_element("css selector", "td.phase").text == "Completed"
    assert by_name[LIVE].find_element("css selector", "td.phase").text == "Running"
    browser.screenshot("dashboard-jobs")
    assert_no_console_errors(browser, "/")


def test_stored_sweeps_are_listed_with_their_combinations_and_downloads(browser: Browser,
                                                                       results_server: str) -> None:
    """Issue 23: a sweep's aggregates stored by the operator (job `sweeps/<name>`) show on the
    index apart from the jobs, and the sweep page tables its combinations and links its files."""
    browser.console_errors()
    browser.open(results_server + "/")
    (row,) = browser.driver.find_elements("css selector", "#sweeps tbody tr")
    assert (row.get_attribute("data-ns"), row.get_attribute("data-name")) == SWEEP
    assert row.find_element("css selector", "td.phase").text == "Completed"
    browser.open(row.find_element("css selector", "a").get_attribute("href"))
    assert browser.attr("body", "data-ready") == "1", browser.text("#error")
    combos = browser.driver.find_elements("css selector", "#combinations tbody tr")
    shown = {r.get_attribute("data-label"): r.find_elements("tag name", "td") for r in combos}
    assert set(shown) == set(SWEEP_THROUGHPUT)
    for label, throughput in SWEEP_THROUGHPUT.items():
        assert float(shown[label][2].text) == pytest.approx(throughput)
    assert [label for label, cells in shown.items() if cells[-1].text] == ["concurrency_4"]  # Pareto
    assert "best throughput: concurrency_4" in browser.text("#best")
    (stored,) = browser.driver.find_elements("css selector", "#aggregates tbody tr")
    links = {a.text: a.get_attribute("href") for a in stored.find_elements("css selector", "td.files a")}
    assert "profile_export_aiperf_sweep.json" in links and "aggregate.json" in links
    with urllib.request.urlopen(links["aggregate.json"], timeout=10) as answer:
        assert json.loads(answer.read())["sweep_aggregate"]["num_combinations"] == 2
    assert f"/api/v1/sweeps/{SWEEP[0]}/{SWEEP[1]}/runs/{SWEEP_EPOCH}/" in links["aggregate.json"]
    browser.screenshot("dashboard-sweep")
    assert_no_console_errors(browser, "sweep")


def test_run_page_tables_and_charts_match_the_exports(browser: Browser, results_server: str) -> None:
    ns, name = HISTORY
    browser.open(f"{results_server}/run?ns={ns}&name={name}&epoch={EPOCHS[0]}")
    recs = records("run1")
    summary = json.loads((DATA / "run1" / "profile_export_aiperf.json").read_text())
    for chart_id, tag in DISTRIBUTIONS.items():
        assert points(browser, f"chart-{chart_id}") == with_metric(recs, tag), chart_id
        assert browser.driver.find_elements("css selector", f"#chart-{chart_id} canvas")
    assert points(browser, "chart-percentiles") == 3 * PERCENTILES
    assert points(browser, "chart-throughput") == THROUGHPUT_BINS
    assert points(browser, "chart-errors") == error_types(recs) > 0
    row = browser.driver.find_element("css selector", '#metrics tr[data-metric="time_to_first_token"]')
    cells = row.find_elements("tag name", "td")
    assert cells[1].text == "ms" and float(cells[2].text) == pytest.approx(summary["time_to_first_token"]["avg"],
                                                                          rel=1e-3)
    assert "Internal Server Error" in browser.text("#errors")
    browser.screenshot("dashboard-run")
    assert_no_console_errors(browser, "run")


def test_run_page_shows_what_the_server_is_and_its_metrics(browser: Browser, results_server: str) -> None:
    ns, name = HISTORY
    browser.open(f"{results_server}/run?ns={ns}&name={name}&epoch={EPOCHS[0]}")
    browser.wait(lambda d: d.find_elements("css selector", "#server-metrics tbody tr"), 10, "server metrics")
    server = json.loads((DATA / "run1" / "profile_export_aiperf.json").read_text())["aiperf_extensions"]["server"]
    shown = dict(line.split("\t", 1) for line in browser.text("#server").splitlines())
    assert shown == {"Server": server["server"], "Models": ", ".join(server["models"])}
    doc = json.loads((DATA / "run1" / "server_metrics_export.json").read_text())
    rows = browser.driver.find_elements("css selector", "#server-metrics tbody tr")
    assert len(rows) == sum(len(m["series"]) for m in doc["metrics"].values())
    name, counter = next((n, m) for n, m in doc["metrics"].items() if m["type"] == "counter")
    cells = browser.driver.find_element("css selector", f'#server-metrics tr[data-metric="{name}"]').find_elements(
        "tag name", "td")
    assert cells[1].text == "counter" and float(cells[3].text) == pytest.approx(counter["series"][0]["stats"]["total"])
    assert_no_console_errors(browser, "run")


def test_comparison_of_two_runs(browser: Browser, results_server: str) -> None:
    ns, name = HISTORY
    browser.open(f"{results_server}/job?ns={ns}&name={name}")
    assert browser.text("#phase") == "Completed" and browser.text("#run-count") == "2"
    boxes = browser.driver.find_elements("css selector", "#runs input[type=checkbox]")
    assert len(boxes) == 2
    for box in boxes:
        box.click()
    browser.driver.find_element("id", "compare").click()
    browser.wait(lambda d: "/compare" in d.current_url and d.find_element("tag name", "body")
                 .get_attribute("data-ready"), 20, "comparison page")
    both = records("run1"), records("run2")
    for chart_id, tag in DISTRIBUTIONS.items():
        assert points(browser, f"cmp-{chart_id}") == sum(with_metric(r, tag) for r in both), chart_id
        assert browser.attr(f"#cmp-{chart_id}", "data-series") == "2"
    assert points(browser, "cmp-throughput") == 2 * THROUGHPUT_BINS
    headers = [h.text for h in browser.driver.find_elements("css selector", "#comparison thead th")]
    assert headers[1:] == [str(EPOCHS[1]), str(EPOCHS[0])]  # the runs table lists newest first
    ttft = browser.driver.find_elements("css selector", '#comparison tr[data-metric="time_to_first_token.avg"] td')
    expected = [json.loads((DATA / run / "profile_export_aiperf.json").read_text())["time_to_first_token"]["avg"]
                for run in ("run2", "run1")]
    assert [float(c.text) for c in ttft[1:]] == pytest.approx(expected, rel=1e-3)
    browser.screenshot("dashboard-compare")
    assert_no_console_errors(browser, "compare")


def test_dropped_progress_socket_falls_back_to_polling(browser: Browser, results_server: str) -> None:
    ns, name = LIVE
    browser.open(f"{results_server}/job?ns={ns}&name={name}")
    # The socket sends "Running" with 3/10 done, then closes; the status route says Completed.
    browser.wait(lambda d: d.find_element("id", "phase").get_attribute("data-phase") == "Completed", 20,
                 "the polled phase")
    assert browser.attr("#live", "data-live") == "polling"
    assert browser.text('#progress tr[data-phase="profiling"] td.completed') == "10"
    with urllib.request.urlopen(results_server + "/fixture/counts") as response:
        counts = json.loads(response.read())
    assert counts["wsOpened"] >= 1 and counts["statusReads"] >= 1
    browser.screenshot("dashboard-job-polling")
    assert_no_console_errors(browser, "job (socket dropped)")


def test_a_finishing_run_updates_the_job_page_live(browser: Browser, tmp_path: Path) -> None:
    artifacts = tmp_path / "live-run"
    port = free_port()
    with running_mock("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "8") as mock:
        proc = subprocess.Popen(
            [sys.executable, "-m", "aiperf.cli", "profile", "--model", "mock", "--url", mock.url,
             "--endpoint-type", "chat", "--streaming", "--request-rate", "25", "--request-count", "50",
             "--artifact-dir", str(artifacts)],
            env={**child_env(), "AIPERF_API_PORT": str(port)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_http(base + "/health", 60)
            browser.console_errors()
            browser.open(f"{base}/dashboard/job?ns=local&name={artifacts.name}")
            first = browser.attr("#phase", "data-phase")
            assert first != "done", "the page loaded after the run ended: nothing was live"
            browser.wait(lambda d: d.find_element("id", "live").get_attribute("data-live") == "websocket", 20,
                         "the progress socket")
            browser.wait(lambda d: d.find_element("css selector", '#progress tr[data-phase="profiling"]'), 30,
                         "profiling progress")
            browser.screenshot("dashboard-live-running")
            # Checked while the api is up: once the run ends its server is gone, and the page's
            # last requests fail by design.
            assert_no_console_errors(browser, "live job page")
            browser.wait(lambda d: d.find_element("id", "phase").get_attribute("data-phase") == "done", 60,
                         "the phase cell to read done")
            completed = browser.text('#progress tr[data-phase="profiling"] td.completed')
            browser.screenshot("dashboard-live-done")
            stdout, stderr = proc.communicate(timeout=60 * float(os.environ.get("AIPERF_TEST_TIMEOUT_SCALE", "1")))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, stderr[-3000:]
    assert first in {"initializing", "starting", "configuring", "ready", "warmup", "profiling"}, first
    assert 0 < int(completed) <= 50  # progress is periodic: the last one may precede the end


def test_a_running_jobs_page_follows_the_cr_status_live_and_by_polling_once_the_socket_drops(
        browser: Browser, cluster: Cluster, tmp_path: Path) -> None:
    make_results_tree(tmp_path)  # its job bench/live has one run still going
    port = free_port()
    server = start_server(tmp_path, port, cluster.kube.kubeconfig_path)
    try:
        with tracked_sockets(browser):
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
