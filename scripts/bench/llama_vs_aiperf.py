"""Our `aiperf profile` beside NVIDIA AIPerf 0.13.0 against a real llama.cpp `llama-server` (issue
20): the same command lines per endpoint kind and concurrency, one table of requests, ok, failed
by type, retries on closed connections, TTFT and ITL. Not run in CI (minutes; the tier
tests/real checks our side).

    dist/export/python/virtualenvs/python-default/3.11.7/bin/python scripts/bench/llama_vs_aiperf.py \\
        [--requests 100] [--skip-aiperf]

Needs scripts/ci/llama-server.sh's build (or $AIPERF_LLAMA_DIR) and scripts/ci/aiperf-oracle.sh's
venv (or $AIPERF_ORACLE_VENV). The model is the tiny random-weight llama of tests/real/_model.py
with 8 slots; every answer is `--osl` tokens (`ignore_eos`), counted by the server's usage on
both sides (`--use-server-token-count`). AIPerf gets a local Hugging Face tokenizer folder
(scripts/bench/vs_aiperf.py's) since it cannot download one here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
ROOTS = [*sorted(str(p) for p in (REPO / "libs").iterdir()), *sorted(str(p) for p in (REPO / "services").iterdir()),
         str(REPO / "cli"), str(REPO / "mock"), str(REPO / "tests"), str(REPO / "scripts")]
sys.path[:0] = ROOTS

from bench.vs_aiperf import aiperf_tokenizer  # noqa: E402
from real._llama import MODEL_ALIAS, llama_dir, llama_server, make_model  # noqa: E402

CASES = [  # (endpoint kind, streaming, concurrency)
    ("chat", True, 1), ("chat", True, 4), ("chat", True, 64), ("chat", False, 4),
    ("completions", True, 4), ("completions", False, 4), ("embeddings", False, 4),
]


def oracle_bin() -> Path:
    venv = os.environ.get("AIPERF_ORACLE_VENV") or subprocess.run(
        [str(REPO / "scripts/ci/aiperf-oracle.sh")], check=True, capture_output=True, text=True).stdout.strip()
    return Path(venv) / "bin"


def flags(url: str, kind: str, streaming: bool, c: int, n: int, osl: int) -> list[str]:
    out = ["--model", MODEL_ALIAS, "--url", url, "--endpoint-type", kind, "--concurrency", str(c),
           "--request-count", str(n), "--isl", "48"]
    if kind != "embeddings":
        out += ["--osl", str(osl), "--extra-inputs", "ignore_eos:true", "--use-server-token-count"]
    return out + (["--streaming"] if streaming else [])


def run(argv: list[str], artifacts: Path, env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    summary_file = artifacts / "profile_export_aiperf.json"
    if not summary_file.exists():
        return {"code": proc.returncode, "error": (proc.stderr or proc.stdout)[-400:]}
    summary = json.loads(summary_file.read_text())
    errors: Counter[str] = Counter()
    for entry in summary.get("error_summary") or []:
        errors[entry["error_details"].get("type") or "?"] += int(entry["count"])
    retries = 0
    raw = artifacts / "profile_export_raw.jsonl"
    if raw.exists():
        for line in raw.read_bytes().splitlines():
            retries += (json.loads(line).get("http_trace") or {}).get("retries", 0)

    def stat(tag: str, key: str = "avg") -> float | None:
        value = summary.get(tag)
        return value.get(key) if isinstance(value, dict) else None

    return {"code": proc.returncode, "requests": stat("request_count"), "errors": dict(errors),
            "retries": retries if raw.exists() else None, "ttft": stat("time_to_first_token"),
            "ttft_p99": stat("time_to_first_token", "p99"), "itl": stat("inter_token_latency"),
            "latency": stat("request_latency")}


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def row(tool: str, case: tuple[str, bool, int], n: int, result: dict[str, Any]) -> str:
    kind, streaming, c = case
    if "error" in result:
        return f"| {tool} | {kind} | {'yes' if streaming else 'no'} | {c} | {n} | run failed: {result['error']!r} |"
    ok = int(result["requests"] or 0)
    failed = sum(result["errors"].values())
    by_type = ", ".join(f"{t} {k}" for t, k in sorted(result["errors"].items())) or "-"
    retries = "-" if result["retries"] is None else str(result["retries"])
    return (f"| {tool} | {kind} | {'yes' if streaming else 'no'} | {c} | {n} | {ok} | {failed} ({by_type}) | "
            f"{retries} | {fmt(result['ttft'])} | {fmt(result['ttft_p99'])} | {fmt(result['itl'], 3)} | "
            f"{fmt(result['latency'])} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--osl", type=int, default=24)
    parser.add_argument("--skip-aiperf", action="store_true")
    args = parser.parse_args()
    cache = llama_dir()
    if cache is None:
        sys.exit("llama-server is not built: run scripts/ci/llama-server.sh")
    theirs = None if args.skip_aiperf else oracle_bin()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(ROOTS)}
    lines = ["| tool | endpoint | stream | c | requests | ok | failed (by type) | retries | TTFT avg ms | "
             "TTFT p99 ms | ITL avg ms | latency avg ms |", "|---" * 12 + "|"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = make_model(cache, work / "tiny.gguf")
        tokenizer = aiperf_tokenizer(theirs) if theirs is not None else None
        for embeddings in (False, True):
            cases = [c for c in CASES if (c[0] == "embeddings") == embeddings]
            with llama_server(cache, model, work / "logs", slots=8, embeddings=embeddings) as server:
                for case in cases:
                    n = max(args.requests, 2 * case[2])
                    base = flags(server.url, case[0], case[1], case[2], n, args.osl)
                    out = work / f"ours-{len(lines)}"
                    ours = run([sys.executable, "-m", "aiperf.cli", "profile", *base, "--export-level", "raw",
                                "--artifact-dir", str(out)], out, env)
                    lines.append(row("aiperf (ours)", case, n, ours))
                    print(lines[-1], flush=True)
                    if theirs is not None:
                        out = work / f"theirs-{len(lines)}"
                        result = run([str(theirs / "aiperf"), "profile", *base, "--tokenizer", str(tokenizer),
                                      "--ui-type", "none", "--artifact-dir", str(out)], out,
                                     dict(os.environ))
                        lines.append(row("AIPerf 0.13.0", case, n, result))
                        print(lines[-1], flush=True)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
