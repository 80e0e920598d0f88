"""Start-up and teardown of a local run (issue 13, item 2), before and after the zygote, with
references measured in the same run.

    python scripts/bench/startup.py [--repeats 3] [--baseline /path/to/other/checkout]

(the repo's virtualenv python; the script puts the source roots on PYTHONPATH.)
`--baseline`: also run the zygote case with another checkout's sources (e.g. the main branch),
interleaved with this one's, for a before/after measured in the same session.

Rows, each the median of `--repeats` runs (wall seconds, and CPU seconds of the whole process
tree from RUSAGE_CHILDREN):
- `python -c pass`: the interpreter alone, the unit of the ratios;
- `import aiperf.cli.main` and `import <every service module>`: raw import cost, what one
  interpreter pays before doing anything (the zygote pays the second once);
- `profile --request-count 1` with `AIPERF_ZYGOTE=0` (one interpreter per service: before) and
  with the zygote (after), against the bundled mock at zero latency, plus the start-up figure
  the run prints (command start to first request sent) and the CPU of the `aiperf` process
  itself (its `--profile-startup` last mark).
Targets (2 cores): `profile --request-count 1` <= 1.0 s wall, start-up to first request <= 0.5 s.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SERVICES = ["aiperf.event_bus_proxy.main", "aiperf.records_manager.main", "aiperf.timing_manager.main",
            "aiperf.api.main", "aiperf.worker_group_manager.main", "aiperf.worker.main",
            "aiperf.dataset_manager.main", "aiperf.record_processor.main"]


def env(repo: Path = REPO) -> dict[str, str]:
    roots = [*sorted((repo / "libs").iterdir()), *sorted((repo / "services").iterdir()), repo / "cli", repo / "mock"]
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(str(p) for p in roots if p.is_dir())
    return e


def timed(argv: list[str], environ: dict[str, str]) -> tuple[float, float, str]:
    """(wall s, CPU s of the process tree, output) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.run(argv, env=environ, capture_output=True, text=True, cwd=tempfile.gettempdir())
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv[:6])}... exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout + proc.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout to compare with")
    args = parser.parse_args()
    py, environ = sys.executable, env()
    port = free_port()
    mock = subprocess.Popen([py, "-m", "aiperf.cli", "mock-server", "--port", str(port), "--ttft-ms", "0",
                             "--itl-ms", "0"], env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or mock.poll() is not None:
                    sys.exit("the mock server did not start")
                time.sleep(0.05)
        rows: dict[str, list[tuple[float, float, float | None, float | None]]] = {}
        with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
            profile = [py, "-m", "aiperf.cli", "profile", "--model", "m", "--url", f"http://127.0.0.1:{port}",
                       "--endpoint-type", "chat", "--streaming", "--request-count", "1", "--profile-startup"]
            cases: list[tuple[str, list[str], dict[str, str]]] = [
                ("python -c pass", [py, "-c", "pass"], environ),
                ("import aiperf.cli.main", [py, "-c", "import aiperf.cli.main"], environ),
                ("import every service module", [py, "-c", "import " + ", ".join(SERVICES)], environ),
                ("profile --request-count 1, AIPERF_ZYGOTE=0 (before)",
                 [*profile, "--artifact-dir", f"{tmp}/before"], {**environ, "AIPERF_ZYGOTE": "0"}),
                ("profile --request-count 1, zygote (after)", [*profile, "--artifact-dir", f"{tmp}/after"], environ),
            ]
            if args.baseline is not None:
                cases.append((f"profile --request-count 1, zygote, {args.baseline}",
                              [*profile, "--artifact-dir", f"{tmp}/baseline"], env(args.baseline.resolve())))
            for _ in range(args.repeats):
                for name, argv, e in cases:
                    wall, cpu, out = timed(argv, e)
                    found = re.search(r"start-up: ([0-9.]+) s", out)
                    own = re.search(r"cli: done \(([0-9.]+) s CPU", out)
                    rows.setdefault(name, []).append((wall, cpu, float(found.group(1)) if found else None,
                                                      float(own.group(1)) if own else None))
    finally:
        mock.terminate()
        mock.wait()
    unit = statistics.median(s[0] for s in rows["python -c pass"])
    print(f"start-up ({os.cpu_count()} cores, median of {args.repeats}; x = wall / `python -c pass` wall)")
    print("| what | wall s | x python | CPU s | start-up to first request s | CPU s of the aiperf process |")
    print("|---|---|---|---|---|---|")
    for name, samples in rows.items():
        wall = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        cells = []
        for i in (2, 3):
            known = [s[i] for s in samples if s[i] is not None]
            cells.append(f"{statistics.median(known):.2f}" if known else "-")
        print(f"| {name} | {wall:.2f} | {wall / unit:.0f} | {cpu:.2f} | {cells[0]} | {cells[1]} |")
    before = statistics.median(s[0] for s in rows["profile --request-count 1, AIPERF_ZYGOTE=0 (before)"])
    after = statistics.median(s[0] for s in rows["profile --request-count 1, zygote (after)"])
    print(f"after/before wall: {after / before:.2f}")
    if args.baseline is not None:
        base = rows[f"profile --request-count 1, zygote, {args.baseline}"]
        print(f"after/baseline wall: {after / statistics.median(s[0] for s in base):.2f}, CPU: "
              f"{statistics.median(s[1] for s in rows['profile --request-count 1, zygote (after)']) / statistics.median(s[1] for s in base):.2f}")


if __name__ == "__main__":
    main()
