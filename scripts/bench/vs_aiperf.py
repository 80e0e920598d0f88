"""Our client beside NVIDIA AIPerf 0.13.0, against a static SSE server that is never the
bottleneck (issue 13, item 1). Not run in CI: it installs AIPerf from PyPI and takes minutes.

    python scripts/bench/vs_aiperf.py [--requests 3000] [--concurrency 64] [--server-core 0] \
        [--client-core 1] [--skip-aiperf]

(run with the repo's virtualenv python, e.g. dist/export/python/virtualenvs/python-default/3.11.7/
bin/python: it needs psutil; the repo's source roots are put on PYTHONPATH by the script.)

What it does, in one go:
1. nginx (Debian's nginx-light, /usr/sbin/nginx) with its own temporary prefix and config, one
   worker pinned to `--server-core`, answers `POST /v1/chat/completions` with a generated static
   body: 64 chat-completion chunks (`data: {...}` SSE events, `text/event-stream`, then a
   usage chunk and `data: [DONE]`).
2. AIPerf 0.13.0 from the venv scripts/ci/aiperf-oracle.sh installs once (`oracle.py`). Offline,
   AIPerf cannot fetch a tokenizer, so the script writes a small Hugging Face tokenizer (BPE
   trained on generated text) and passes its folder.
3. Each client runs pinned (taskset; all its processes inherit it) to `--client-core`, with the
   same workload: streaming chat, 128-token prompts (stddev 0), 64 output tokens, concurrency C,
   first `--request-count 1`, then `--request-count N`.

Figures: requests/s (the client's own `request_throughput`), marginal CPU per request
((cpu(N) - cpu(1)) / (N - 1), user+sys of the whole process tree, from RUSAGE_CHILDREN: every
process of both tools is waited for by its parent, so all of them roll up), wall time of the
1-request run, start-up to first request (command start to the earliest `request_start_ns` in
`profile_export.jsonl`, else the tool's own figure), reported TTFT avg, peak RSS of the process
tree (PSS from psutil, sampled every 50 ms). Printed as one table with AIPerf/ours ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from oracle import aiperf_bin, aiperf_env, aiperf_flags, aiperf_tokenizer

REPO = Path(__file__).resolve().parents[2]
NGINX = "/usr/sbin/nginx"
AIPERF_VERSION = "0.13.0"
TOKENS = 64


def sse_body(tokens: int = TOKENS) -> str:
    """The static streamed answer: `tokens` content chunks, a usage chunk, `[DONE]`."""
    events = []
    for i in range(tokens):
        delta = {"role": "assistant", "content": " tok"} if i == 0 else {"content": " tok"}
        chunk = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1700000000,
                 "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        events.append(chunk)
    events.append({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1700000000,
                   "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 128, "completion_tokens": tokens, "total_tokens": 128 + tokens}})
    body = "".join(f"data: {json.dumps(e, separators=(',', ':'))}\n\n" for e in events)
    return body + "data: [DONE]\n\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Nginx:
    """nginx-light on 127.0.0.1:`port`, one worker, its own prefix; stopped on exit."""

    def __init__(self, workdir: Path, port: int, core: int) -> None:
        self.workdir, self.port, self.core = workdir, port, core
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Nginx:
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        (self.workdir / "sse.txt").write_text(sse_body())
        for folder in (self.workdir, *self.workdir.parents):  # nginx's worker runs as nobody
            if str(folder) in ("/", "/tmp"):
                break
            folder.chmod(0o755)
        models = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).replace('"', '\\"')
        conf = f"""
daemon off;
worker_processes 1;
pid {self.workdir}/nginx.pid;
error_log {self.workdir}/logs/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 10000000;
    keepalive_timeout 300s;
    client_body_buffer_size 64k;
    client_body_temp_path {self.workdir}/body;
    proxy_temp_path {self.workdir}/proxy;
    fastcgi_temp_path {self.workdir}/fastcgi;
    uwsgi_temp_path {self.workdir}/uwsgi;
    scgi_temp_path {self.workdir}/scgi;
    server {{
        listen 127.0.0.1:{self.port} backlog=4096;
        # The static module answers POST with 405; the error page (a GET of the body) turns it
        # into a 200 with the SSE body, read from a file (too long for a config string).
        location = /v1/chat/completions {{ error_page 405 =200 /sse; return 405; }}
        location = /sse {{
            internal;
            default_type text/event-stream;
            add_header Cache-Control no-cache;
            alias {self.workdir}/sse.txt;
        }}
        location = /v1/models {{ default_type application/json; return 200 "{models}"; }}
        location / {{ default_type text/plain; return 200 "ok"; }}
    }}
}}
"""
        conf_path = self.workdir / "nginx.conf"
        conf_path.write_text(conf)
        self.proc = subprocess.Popen(["taskset", "-c", str(self.core), NGINX, "-p", str(self.workdir),
                                      "-c", str(conf_path)], stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                if self.proc.poll() is not None:
                    why = self.proc.stderr.read().decode() if self.proc.stderr else ""
                    raise SystemExit(f"nginx did not start: {why}") from None
                time.sleep(0.05)
        raise SystemExit("nginx did not start listening within 10 s")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


@dataclass
class Run:
    """One client run: what it cost and what it reported."""

    wall_s: float
    cpu_s: float
    peak_rss_mib: float
    code: int
    started_ns: int
    artifacts: Path
    output: str = ""
    summary: dict[str, object] = field(default_factory=dict)

    def metric(self, name: str, stat: str = "avg") -> float | None:
        value = self.summary.get(name)
        if isinstance(value, dict) and isinstance(value.get(stat), int | float):
            return float(value[stat])
        return None

    def startup_s(self) -> float | None:
        """Command start to the earliest request start found in profile_export.jsonl."""
        path = self.artifacts / "profile_export.jsonl"
        first = None
        if path.exists():
            with path.open() as f:
                for line in f:
                    found = _find_key(json.loads(line), "request_start_ns")
                    if isinstance(found, int) and (first is None or found < first):
                        first = found
        return None if first is None else (first - self.started_ns) / 1e9


def _find_key(obj: object, key: str) -> object:
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        for value in obj.values():
            if (found := _find_key(value, key)) is not None:
                return found
    return None


def run_client(argv: list[str], *, core: int, artifacts: Path, env: dict[str, str], cwd: Path) -> Run:
    """Run `argv` pinned to `core`; CPU from RUSAGE_CHILDREN, peak RSS by sampling the tree."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started_ns = time.time_ns()
    t0 = time.monotonic()
    proc = subprocess.Popen(["taskset", "-c", str(core), *argv], env=env, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        try:
            root = psutil.Process(proc.pid)
        except psutil.NoSuchProcess:
            return
        while not stop.is_set():
            total = 0
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                break
            for p in procs:
                try:  # PSS: forked services share pages, RSS would count them once per process
                    total += p.memory_full_info().pss
                except psutil.Error:
                    pass
            peak = max(peak, total)
            stop.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, _ = proc.communicate()
    wall = time.monotonic() - t0
    stop.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    run = Run(wall_s=wall, cpu_s=cpu, peak_rss_mib=peak / 2**20, code=proc.returncode, started_ns=started_ns,
              artifacts=artifacts, output=out.decode(errors="replace"))
    summary = artifacts / "profile_export_aiperf.json"
    if summary.exists():
        run.summary = json.loads(summary.read_text())
    return run


def workload(url: str, concurrency: int, requests: int) -> list[str]:
    return ["--model", "m", "--url", url, "--endpoint-type", "chat", "--streaming",
            "--concurrency", str(min(concurrency, requests)), "--request-count", str(requests),
            "--isl", "128", "--isl-stddev", "0", "--osl", str(TOKENS), "--random-seed", "1"]


def ours(url: str, c: int, n: int, out: Path) -> list[str]:
    py = REPO / "dist/export/python/virtualenvs/python-default/3.11.7/bin/python"
    exe = str(py) if py.exists() else sys.executable
    return [exe, "-m", "aiperf.cli", "profile", *workload(url, c, n), "--artifact-dir", str(out)]


def theirs(bin_dir: Path, tokenizer: Path, url: str, c: int, n: int, out: Path) -> list[str]:
    return [str(bin_dir / "aiperf"), "profile", *workload(url, c, n), "--artifact-dir", str(out),
            *aiperf_flags(tokenizer)]


def our_env() -> dict[str, str]:
    roots = [*sorted((REPO / "libs").iterdir()), *sorted((REPO / "services").iterdir()), REPO / "cli", REPO / "mock"]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in roots if p.is_dir())
    return env


def measure(name: str, build: callable, *, requests: int, concurrency: int, core: int, env: dict[str, str],
            work: Path, url: str) -> dict[str, float | None]:
    """The figures of one tool: a 1-request run, then an N-request run."""
    runs = {}
    for n in (1, requests):
        out = work / f"{name}-{n}"
        run = run_client(build(url, concurrency, n, out), core=core, artifacts=out, env=env, cwd=work)
        if run.code != 0:
            tail = "\n".join(run.output.strip().splitlines()[-15:])
            print(f"{name}: --request-count {n} exited {run.code}:\n{tail}", file=sys.stderr)
        runs[n] = run
    one, big = runs[1], runs[requests]
    startup = big.startup_s()
    if startup is None and (m := _startup_line(big.output)) is not None:
        startup = m
    ok = big.code == 0
    return {
        "req/s on one core": big.metric("request_throughput") if ok else None,
        "marginal CPU ms/request": 1000 * (big.cpu_s - one.cpu_s) / (requests - 1) if ok and one.code == 0 else None,
        "wall s, --request-count 1": one.wall_s if one.code == 0 else None,
        "start-up to first request s": startup if ok else None,
        "TTFT avg ms (reported)": big.metric("time_to_first_token") if ok else None,
        f"peak PSS MiB, all processes ({requests} req)": big.peak_rss_mib if ok else None,
        "CPU s total (N run)": big.cpu_s if ok else None,
    }


def _startup_line(output: str) -> float | None:
    for line in output.splitlines():
        if line.startswith("start-up:"):
            return float(line.split()[1])
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    parser.add_argument("--skip-aiperf", action="store_true", help="only our column")
    args = parser.parse_args()
    if not Path(NGINX).exists():
        sys.exit(f"{NGINX} not found: apt-get install nginx-light")
    results: dict[str, dict[str, float | None]] = {}
    with tempfile.TemporaryDirectory(prefix="vs-aiperf-") as tmp:
        work = Path(tmp)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        with Nginx(work / "nginx", port, args.server_core):
            common = dict(requests=args.requests, concurrency=args.concurrency, core=args.client_core,
                          work=work, url=url)
            if not args.skip_aiperf:
                try:
                    bin_dir = aiperf_bin()
                    tokenizer = aiperf_tokenizer(bin_dir)
                    env = aiperf_env()
                    results["AIPerf 0.13.0"] = measure(
                        "aiperf013", lambda u, c, n, o: theirs(bin_dir, tokenizer, u, c, n, o), env=env, **common)
                except subprocess.CalledProcessError as exc:
                    print(f"AIPerf {AIPERF_VERSION} could not be installed or set up: {exc}", file=sys.stderr)
            results["ours"] = measure("ours", ours, env=our_env(), **common)
    print_table(results)


def print_table(results: dict[str, dict[str, float | None]]) -> None:
    names = list(results)
    rows = list(next(iter(results.values())))
    cols = [*names, "AIPerf/ours"] if len(names) == 2 else names
    print("| figure | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for row in rows:
        values = [results[n][row] for n in names]
        cells = ["-" if v is None else f"{v:,.2f}" for v in values]
        if len(names) == 2:
            a, b = values
            cells.append("-" if a is None or b is None or b == 0 else f"{a / b:.2f}x")
        print(f"| {row} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
