"""The command as users install it: `aiperf --help` and `profile --request-count 1` from the
pip-installed wheel, beside NVIDIA AIPerf 0.13.0 installed the same way, in one run (issue 24,
item 2; targets on 2 cores: `--help` <= 0.3 s, `profile --request-count 1` <= 1.0 s wall).

    python3.11 scripts/bench/installed.py [--repeats 7] [--wheel dist/aiperf_actors-*.whl] \
        [--before OTHER.whl] [--skip-aiperf] [--pex] [--venv-root DIR]

Ours: the wheel (`./pants package :wheel` first, or `--wheel`) pip-installed into a venv cached
under ~/.cache/aiperf-bench (reinstalled when the wheel changes); AIPerf: the venv of
`scripts/ci/aiperf-oracle.sh`. `--pex` adds rows for `dist/cli/aiperf.pex` (venv mode, built by
`./pants package cli:aiperf`). No pinning: every process may use both cores, as a user's would.

Rows (median and min of `--repeats`, runs of the tools interleaved so a busy host shifts
them alike): `python -c pass` (the interpreter alone, from our venv), `--help`, and `profile
--request-count 1` against our mock server at zero latency (started from our venv; streaming
chat, 128-token prompt, 64 tokens out): wall seconds, CPU seconds of the whole process tree
(RUSAGE_CHILDREN: the processes each tool waits for) and, for the profile, the start-up to the
first request (command start to the earliest `request_start_ns` of `profile_export.jsonl`).
Then the ratio AIPerf/ours of the medians (the reference measured in the same run) and the
issue's target for the two wall rows.

`--before WHEEL` adds a column for another build of ours (e.g. the main branch's wheel, copied
aside before `./pants package :wheel` overwrites it), installed into its own cached venv, for a
before/after in the same run. `--venv-root DIR` moves our cached venvs (default: the cache).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from oracle import CACHE, REPO, aiperf_bin, aiperf_env, aiperf_flags, aiperf_tokenizer

WORKLOAD = ["--model", "m", "--endpoint-type", "chat", "--streaming", "--request-count", "1", "--isl", "128",
            "--isl-stddev", "0", "--osl", "64", "--random-seed", "1"]


TARGETS = {"--help: wall s": 0.3, "profile --request-count 1: wall s": 1.0}
"""Issue 24's targets (2 cores, the installed wheel)."""


def our_venv(wheel: Path, venv: Path) -> Path:
    """The `bin` folder of the venv `venv` with `wheel` installed (made once per wheel content)."""
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()[:12]
    stamp = venv / ".wheel"
    if not stamp.exists() or stamp.read_text() != digest:
        if not (venv / "bin" / "pip").exists():
            py = shutil.which("python3.11") or sys.executable
            subprocess.run([py, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", str(wheel)],
                       check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", "--no-deps",
                        "--force-reinstall", str(wheel)], check=True)
        stamp.write_text(digest)
    return venv / "bin"


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int]:
    """(wall s, CPU s of the process tree, start ns) of one run; exits on failure."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started_ns = time.time_ns()
    t0 = time.monotonic()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv[:4])}... exited {proc.returncode}:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), started_ns


def first_request_s(artifacts: Path, started_ns: int) -> float | None:
    """Command start to the earliest request start of profile_export.jsonl."""
    path = artifacts / "profile_export.jsonl"
    if not path.exists():
        return None
    first = None
    for line in path.read_text().splitlines():
        meta = json.loads(line).get("metadata", {})
        start = meta.get("request_start_ns")
        if isinstance(start, int) and (first is None or start < first):
            first = start
    return None if first is None else (first - started_ns) / 1e9


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_mock(bin_dir: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    mock = subprocess.Popen([str(bin_dir / "aiperf"), "mock-server", "--port", str(port), "--ttft-ms", "0",
                             "--itl-ms", "0"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return mock, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    mock.kill()
    sys.exit("the mock server did not start within 60 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--wheel", type=Path, default=None, help="default: the newest dist/aiperf_actors-*.whl")
    parser.add_argument("--skip-aiperf", action="store_true")
    parser.add_argument("--pex", action="store_true", help="also dist/cli/aiperf.pex")
    parser.add_argument("--before", type=Path, default=None, help="another wheel of ours, for a before/after column")
    parser.add_argument("--venv-root", type=Path, default=CACHE, help="where our venvs are cached")
    args = parser.parse_args()
    wheels = [args.wheel] if args.wheel else sorted(REPO.glob("dist/aiperf_actors-*.whl"), key=lambda p: p.stat().st_mtime)
    if not wheels:
        sys.exit("no wheel: run `./pants package :wheel` first (or pass --wheel)")
    ours_bin = our_venv(wheels[-1], args.venv_root / "wheel-venv")
    env = aiperf_env()  # ours runs from its venv alone too: no source roots on the path
    tools: dict[str, tuple[list[str], list[str]]] = {"ours": ([str(ours_bin / "aiperf")], [])}
    if args.before:
        before_bin = our_venv(args.before, args.venv_root / "wheel-venv-before")
        tools["ours (before)"] = ([str(before_bin / "aiperf")], [])
    if args.pex:
        tools["ours (pex)"] = ([shutil.which("python3.11") or sys.executable, str(REPO / "dist/cli/aiperf.pex")], [])
    if not args.skip_aiperf:
        theirs = aiperf_bin()
        tools["AIPerf 0.13.0"] = ([str(theirs / "aiperf")], aiperf_flags(aiperf_tokenizer(theirs)))
    rows: dict[str, dict[str, list[float]]] = {}

    def add(row: str, tool: str, value: float | None) -> None:
        if value is not None:
            rows.setdefault(row, {}).setdefault(tool, []).append(value)

    mock, url = start_mock(ours_bin, env)
    try:
        with tempfile.TemporaryDirectory(prefix="installed-") as tmp:
            work = Path(tmp)
            for i in range(args.repeats):
                wall, cpu, _ = timed([str(ours_bin / "python"), "-c", "pass"], env, work)
                add("python -c pass: wall s", "ours", wall)
                for tool, (cmd, extra) in tools.items():
                    wall, cpu, _ = timed([*cmd, "--help"], env, work)
                    add("--help: wall s", tool, wall)
                    add("--help: CPU s", tool, cpu)
                    out = work / f"{tool.replace(' ', '_').strip('()')}-{i}"
                    wall, cpu, t0 = timed([*cmd, "profile", *WORKLOAD, "--url", url, "--artifact-dir", str(out),
                                           *extra], env, work)
                    add("profile --request-count 1: wall s", tool, wall)
                    add("profile --request-count 1: CPU s (all processes)", tool, cpu)
                    add("profile --request-count 1: start-up to first request s", tool, first_request_s(out, t0))
    finally:
        mock.terminate()
        mock.wait()
    print_table(rows, list(tools), args.repeats)


def print_table(rows: dict[str, dict[str, list[float]]], tools: list[str], repeats: int) -> None:
    """One markdown table: median (min) per tool, AIPerf/ours of the medians, the target."""
    reference = "AIPerf 0.13.0" if "AIPerf 0.13.0" in tools else None
    print(f"median (min) of {repeats} runs; 2 cores, no pinning")
    print("| figure | " + " | ".join(tools) + (" | AIPerf/ours" if reference else "") + " | target |")
    print("|---" * (len(tools) + 2 + bool(reference)) + "|")
    for row, by_tool in rows.items():
        cells = []
        for tool in tools:
            values = by_tool.get(tool)
            cells.append("-" if not values else f"{statistics.median(values):.3f} ({min(values):.3f})")
        if reference:
            ours, theirs = by_tool.get("ours"), by_tool.get(reference)
            cells.append(f"{statistics.median(theirs) / statistics.median(ours):.2f}x"
                         if ours and theirs and statistics.median(ours) > 0 else "-")
        target = TARGETS.get(row)
        if target is None or not by_tool.get("ours"):
            cells.append("-")
        else:
            met = statistics.median(by_tool["ours"]) <= target
            cells.append(f"<= {target:g} ({'met' if met else 'missed'} by the median)")
        print(f"| {row} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
