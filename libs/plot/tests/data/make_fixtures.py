"""Writes real exports of short runs against the mock server into argv[1] (tests/data/README.md)."""
import subprocess
import sys
from pathlib import Path
from aiperf.mock_server.testing import running_mock

OUT = Path(sys.argv[1])
KEEP = {"profile_export_aiperf.json", "profile_export.jsonl"}

def profile(url, dest, *flags):
    r = subprocess.run([sys.executable, "-m", "aiperf.cli", "profile", "--model", "mock", "--url", url,
                        "--random-seed", "3", "--isl", "32", "--workers-max", "2", "--artifact-dir", str(dest), *flags],
                       capture_output=True, text=True)
    print(dest, r.returncode, r.stderr[-500:], flush=True)

def prune(root):
    for p in sorted(root.rglob("*"), reverse=True):
        if p.is_file() and p.name not in KEEP and p.name != "profile_export_aiperf_sweep.json":
            p.unlink()
        elif p.is_dir() and not any(p.iterdir()):
            p.rmdir()

with running_mock("--ttft-ms", "30", "--itl-ms", "4", "--jitter-ms", "3", "--output-tokens", "12",
                  "--error-rate", "0.2", "--seed", "5") as s:
    profile(s.url, OUT / "streaming", "--streaming", "--concurrency", "2", "--request-count", "20")
with running_mock("--ttft-ms", "30", "--itl-ms", "4", "--jitter-ms", "3", "--output-tokens", "12") as s:
    profile(s.url, OUT / "plain", "--concurrency", "2", "--request-count", "8")
    profile(s.url, OUT / "sweep", "--streaming", "--concurrency", "1,3", "--request-count", "9")
prune(OUT)
