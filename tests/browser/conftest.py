"""Fixtures of the browser tests: headless Debian Chromium through Selenium, the fixture
results server as a child process, and the screenshot directory.

Screenshots go to ``$AIPERF_SCREENSHOT_DIR`` (default: a pytest temporary directory); every
saved path is printed. Without /usr/bin/chromium or /usr/bin/chromedriver the tests skip.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiperf.mock_server.testing import held_port

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
HERE = Path(__file__).parent


def _scale() -> float:
    try:
        return max(float(os.environ.get("AIPERF_TEST_TIMEOUT_SCALE", "1") or 1), 0.1)
    except ValueError:
        return 1.0


def wait_http(url: str, timeout_s: float) -> None:
    """Return once `url` answers 200; `TimeoutError` after `timeout_s` seconds."""
    deadline = time.monotonic() + timeout_s * _scale()
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} did not answer within {timeout_s} s")
        time.sleep(0.05)


_HELD = contextlib.ExitStack()
atexit.register(_HELD.close)


def free_port() -> int:
    """A TCP port on 127.0.0.1 for a server these tests start, held (`held_port`) until this
    process exits: no other socket takes it before the server binds it."""
    return _HELD.enter_context(held_port())


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    configured = os.environ.get("AIPERF_SCREENSHOT_DIR")
    path = Path(configured) if configured else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


class Browser:
    """The WebDriver plus helpers: wait for a condition, read the console, save screenshots."""

    def __init__(self, driver: Any, screenshots: Path) -> None:
        self.driver = driver
        self.screenshots = screenshots

    def open(self, url: str) -> None:
        """Load `url` and wait until the page script finished (body[data-ready])."""
        self.driver.get(url)
        self.wait(lambda d: d.find_element("tag name", "body").get_attribute("data-ready"), 20, f"{url} ready")

    def wait(self, condition: Any, timeout_s: float, what: str) -> Any:
        from selenium.common.exceptions import TimeoutException
        from selenium.webdriver.support.ui import WebDriverWait

        try:
            return WebDriverWait(self.driver, timeout_s * _scale(), poll_frequency=0.05).until(condition)
        except TimeoutException:
            raise TimeoutError(f"timed out waiting for {what}; page error: {self.text('#error')!r}") from None

    def text(self, css: str) -> str:
        """The text of the first element matching `css` ("" when none), read in one script call:
        the page re-renders its rows, so an element found by one call can be stale by the next."""
        value = self.driver.execute_script(
            "const e = document.querySelector(arguments[0]); return e ? e.innerText : '';", css)
        return str(value or "")

    def attr(self, css: str, name: str) -> str | None:
        value = self.driver.find_element("css selector", css).get_attribute(name)
        return None if value is None else str(value)

    def console_errors(self) -> list[dict[str, Any]]:
        """Browser log entries at SEVERE since the last call."""
        return [e for e in self.driver.get_log("browser") if e.get("level") == "SEVERE"]

    def screenshot(self, name: str) -> Path:
        path = self.screenshots / f"{name}.png"
        self.driver.save_screenshot(str(path))
        print(f"screenshot: {path}")
        return path


@pytest.fixture(scope="session")
def browser(screenshot_dir: Path) -> Iterator[Browser]:
    if not CHROMIUM.exists() or not CHROMEDRIVER.exists():
        pytest.skip(f"browser tests need {CHROMIUM} and {CHROMEDRIVER} (Debian packages chromium, "
                    "chromium-driver; CI installs them with scripts/ci/install-browser.sh)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000",
                "--disable-gpu", "--disable-extensions"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        yield Browser(driver, screenshot_dir)
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def results_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The fixture results server (`_fixture_app`) over a fresh tree; yields its base URL."""
    from browser._fixture_app import make_results_tree

    base = tmp_path_factory.mktemp("results")
    make_results_tree(base)
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(HERE / "_fixture_app.py"), str(base), str(port)],
                            env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_http(url + "/api/v1/results", 60)
        except TimeoutError:
            proc.kill()
            raise RuntimeError(f"fixture server did not start: {proc.communicate()[1].decode()[-2000:]}") from None
        yield url
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


@pytest.fixture
def cluster() -> Iterator[Any]:
    """The fake Kubernetes API server with a running AIPerfJob (`_operator_job.open_cluster`)."""
    from browser._operator_job import open_cluster

    with open_cluster() as fake:
        yield fake
