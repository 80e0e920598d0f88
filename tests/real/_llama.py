"""A real llama.cpp `llama-server` for the tests of this tier: where the build is, a tiny model
made at test time, and the server as a child process on 127.0.0.1.

The binary and llama.cpp's `gguf-py` come from scripts/ci/llama-server.sh's cache
(`$AIPERF_LLAMA_DIR`, else `~/.cache/aiperf-llama/<version>`); without them every test here is
skipped with one line naming the script.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiperf.mock_server.testing import held_port, timeout_scale

LLAMA_VERSION = "0.3.36"
"""The llama-cpp-python sdist scripts/ci/llama-server.sh builds from (keep the two equal)."""
BUILD_SCRIPT = "scripts/ci/llama-server.sh"
VOCAB = "ggml-vocab-llama-spm.gguf"
"""A SentencePiece llama vocabulary (32,000 tokens) from llama.cpp's models/ folder."""
MODEL_ALIAS = "tiny-llama"


def llama_dir() -> Path | None:
    """The build cache when it holds the server binary and gguf-py, else None."""
    env = os.environ.get("AIPERF_LLAMA_DIR")
    base = Path(env) if env else Path.home() / ".cache" / "aiperf-llama" / LLAMA_VERSION
    if (base / "bin" / "llama-server").is_file() and (base / "src/vendor/llama.cpp/gguf-py").is_dir():
        return base
    return None


def make_model(cache: Path, out: Path) -> Path:
    """Write the tiny random-weight model (tests/real/_model.py) to `out`, with the vocab of the
    llama.cpp tree in `cache`; returns `out`."""
    tree = cache / "src" / "vendor" / "llama.cpp"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree / "gguf-py"), *sys.path])}
    subprocess.run([sys.executable, str(Path(__file__).with_name("_model.py")), "--vocab",
                    str(tree / "models" / VOCAB), "--out", str(out)], env=env, check=True, timeout=300)
    return out


@dataclass
class LlamaServer:
    """A running llama-server: its base URL and the process."""

    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def get(self, path: str) -> tuple[int, dict[str, str], Any]:
        """GET `path`: status, headers, parsed JSON body (None when not JSON)."""
        host, port = self.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        try:
            conn.request("GET", path)
            answer = conn.getresponse()
            body = answer.read()
            try:
                data = json.loads(body)
            except ValueError:
                data = None
            return answer.status, dict(answer.getheaders()), data
        finally:
            conn.close()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@contextmanager
def llama_server(cache: Path, model: Path, logs: Path, *, slots: int = 4, embeddings: bool = False,
                 context: int = 4096) -> Iterator[LlamaServer]:
    """`llama-server` serving `model` on a free port with `slots` parallel slots (`-np`),
    Prometheus metrics on, one thread (the test machine has two cores). Blocks until `/health`
    answers 200 (deadline 120 s, scaled); stops the server on exit."""
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"llama-server-{time.monotonic_ns()}.log"
    with held_port() as port, log.open("wb") as sink:
        cmd = [str(cache / "bin" / "llama-server"), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
               "-np", str(slots), "-c", str(context * slots), "--metrics", "-t", "1", "-tb", "1",
               "--alias", MODEL_ALIAS, "--no-webui", *(["--embeddings", "--pooling", "mean"] if embeddings else [])]
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    server = LlamaServer(url=f"http://127.0.0.1:{port}", proc=proc, log=log)
    try:
        deadline = time.monotonic() + 120 * timeout_scale()
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {proc.returncode}:\n{server.log_tail()}")
            try:
                if server.get("/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama-server not healthy within the deadline:\n{server.log_tail()}")
            time.sleep(0.1)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
