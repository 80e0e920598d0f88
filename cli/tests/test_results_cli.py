"""`aiperf results serve DIR`: a local artifact tree as `aiperf demo` and multi-run profiles
leave it, served by a real process on 127.0.0.1; bad input is one line and exit 2."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from aiperf.cli.main import main

EXPORTS = ("profile_export_aiperf.json", "profile_export_aiperf.csv", "profile_export.jsonl", "inputs.json")


def write_run(folder: Path) -> None:
    folder.mkdir(parents=True)
    for name in EXPORTS:
        (folder / name).write_text("{}\n")


def test_missing_directory_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["results", "serve", str(tmp_path / "artifacts")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a directory" in err


@pytest.mark.timeout(90)
def test_serves_the_demo_and_a_multi_run_tree(tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    write_run(artifacts / "demo")  # `aiperf demo`
    for trial in (1, 2):
        write_run(artifacts / "bench" / "profile_runs" / f"trial_000{trial}")
    proc = subprocess.Popen([sys.executable, "-m", "aiperf.cli", "results", "serve", str(artifacts), "--port",
                             "0"], env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert found is not None, line
        port = int(found.group(1))
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/results", timeout=10) as response:
            jobs = json.load(response)["jobs"]
        assert [(j["namespace"], j["name"], j["runCount"]) for j in jobs] == [("local", "bench", 2),
                                                                              ("local", "demo", 1)]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_an_unusable_kubeconfig_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(tmp_path / "artifacts" / "demo")
    missing = tmp_path / "no-such-kubeconfig"
    assert main(["results", "serve", str(tmp_path / "artifacts"), "--kubeconfig", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(missing) in err, err
