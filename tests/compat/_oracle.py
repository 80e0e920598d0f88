"""NVIDIA AIPerf 0.13.0 as the test oracle: where its venv is, how to run its `aiperf` command, and
the comparable form of a benchmark (the values a run depends on, in one shape for both tools).

The venv is made by `scripts/ci/aiperf-oracle.sh` (cached outside the repo); AIPerf is never
imported here: its command runs in a subprocess and its wheel's files are read from the venv.
"""

from __future__ import annotations

import json
import os
import posixpath
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

VERSION = "0.13.0"
SCRIPT = "scripts/ci/aiperf-oracle.sh"
SKIP = f"AIPerf {VERSION} oracle venv not found: run {SCRIPT} (or set AIPERF_ORACLE_VENV)"


def venv_path() -> Path:
    """`$AIPERF_ORACLE_VENV`, else the script's cache folder."""
    given = os.environ.get("AIPERF_ORACLE_VENV")
    if given:
        return Path(given)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "aiperf-oracle" / VERSION


@dataclass(frozen=True)
class Oracle:
    """AIPerf 0.13.0 installed in `venv`."""

    venv: Path

    @property
    def templates(self) -> Path:
        """Its wheel's config templates folder."""
        (site,) = (self.venv / "lib").glob("python3*/site-packages")
        return site / "aiperf" / "config" / "templates"

    def run(self, *args: str, cwd: Path | None = None, timeout: float = 120,
            env: dict[str, str | None] | None = None) -> subprocess.CompletedProcess[str]:
        """`aiperf ARGS...` of the oracle, with a plain environment (no kubeconfig, no
        variables a template reads, a wide terminal), updated by `env` (None removes one)."""
        plain = {"PATH": f"{self.venv / 'bin'}:/usr/bin:/bin", "HOME": str(cwd or Path.cwd()), "COLUMNS": "200",
                 "NO_COLOR": "1", "KUBECONFIG": "/nonexistent", "HF_HUB_OFFLINE": "1", **(env or {})}
        return subprocess.run([str(self.venv / "bin" / "aiperf"), *args], capture_output=True, text=True,
                              env={k: v for k, v in plain.items() if v is not None}, cwd=cwd, timeout=timeout,
                              check=False)

    def kube_validate(self, paths: list[Path], cwd: Path) -> dict[str, dict[str, Any]]:
        """AIPerf's `kube validate -o json` verdict on each file, by file name (`passed`,
        `errors`)."""
        done = self.run("kube", "validate", *map(str, paths), "-o", "json", cwd=cwd)
        return {Path(r["path"]).name: r for r in json.loads(done.stdout)}

    def make_tokenizer(self, folder: Path, words: bool = False) -> Path:
        """A small Hugging Face tokenizer saved into `folder`, made with the oracle venv's
        `tokenizers`/`transformers` (AIPerf needs one and cannot download any here; ours reads
        the same folder). `words`: a word-level one (one token per whitespace-separated word,
        its vocabulary the 4,000 commonest words of AIPerf's own prompt corpus, read from the
        venv): AIPerf tokenizes that whole corpus (5 MB) at the start of every run with a
        synthetic dataset, about 7 CPU seconds with the byte-level BPE one and 2 with this."""
        if not (folder / "tokenizer.json").exists():
            script = _WORD_TOKENIZER_SCRIPT if words else _TOKENIZER_SCRIPT
            subprocess.run([str(self.venv / "bin" / "python"), "-c", script, str(folder)], check=True,
                           capture_output=True, timeout=300, env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
        return folder


_TOKENIZER_SCRIPT = """
import sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
words = "the quick brown fox jumps over a lazy dog while seven wizards judge latency tokens".split()
text = [" ".join(words[(i * 7 + j) % len(words)] for j in range(40)) for i in range(500)]
tok = Tokenizer(models.BPE(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>", "<s>", "</s>"],
                                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                        eos_token="</s>").save_pretrained(sys.argv[1])
"""

_WORD_TOKENIZER_SCRIPT = """
import pathlib, sys
import aiperf
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
corpus = pathlib.Path(aiperf.__file__).parent / "dataset" / "generator" / "assets" / "shakespeare.txt"
tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tok.train([str(corpus)], trainers.WordLevelTrainer(vocab_size=4000, special_tokens=["<unk>", "<s>", "</s>"]))
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                        eos_token="</s>").save_pretrained(sys.argv[1])
"""


def find_oracle() -> Oracle:
    """The oracle, or skip the test with one line naming the script that installs it."""
    venv = venv_path()
    if not (venv / "bin" / "aiperf").is_file() or not (venv / ".complete").is_file():
        pytest.skip(SKIP)
    return Oracle(venv)


def expand(oracle: Oracle, path: Path, cwd: Path) -> list[dict[str, Any]]:
    """AIPerf's own reading of config file `path`: `config expand --full` (every variation's
    label and fully merged benchmark)."""
    done = oracle.run("config", "expand", str(path), "--format", "json", "--full", cwd=cwd)
    assert done.returncode == 0, done.stderr[-2000:]
    variations: list[dict[str, Any]] = json.loads(done.stdout)["variations"]
    return variations


# -- one comparable shape --------------------------------------------------------------------

def distribution(d: Any) -> Any:
    """A distribution as ('fixed', v) / ('normal', mean, sd) / ('lognormal', mean, median) /
    ('mix', ((dist, weight), ...)) / ('points', ((v, w), ...)), with its bounds. AIPerf writes a
    fixed value as `{value}`, ours as `{mean}` with no spread; both are ('fixed', v)."""
    if d is None:
        return None
    if isinstance(d, int | float):
        return ("fixed", float(d))
    bounds = (d.get("min"), d.get("max"))
    if d.get("peaks"):
        body: Any = ("mix", tuple((distribution(p.get("distribution", {k: v for k, v in p.items() if k != "weight"})),
                                   float(p.get("weight", 1.0))) for p in d["peaks"]))
    elif d.get("points"):
        body = ("points", tuple((float(p["value"]), float(p.get("weight", 1.0))) for p in d["points"]))
    elif "value" in d:
        body = ("fixed", float(d["value"]))
    elif d.get("median") is not None:
        body = ("lognormal", float(d["mean"]), float(d["median"]))
    elif not d.get("stddev"):
        body = ("fixed", float(d["mean"]))
    else:
        body = ("normal", float(d["mean"]), float(d["stddev"]))
    return (*body, bounds) if bounds != (None, None) else body


def _ramp(r: Any) -> Any:
    """A ramp as (duration s, strategy): AIPerf writes `{duration, strategy}`, ours `{duration}`."""
    if r is None:
        return None
    return (float(r["duration"]), r.get("strategy", "linear"))


def _phase(p: dict[str, Any]) -> dict[str, Any]:
    kind = p.get("kind") or p.get("name")
    cancellation = p.get("cancellation") or {}
    grace = p.get("grace_period")
    out = {
        "name": p.get("name", "profiling"), "kind": kind, "type": p["type"], "requests": p.get("requests"),
        "duration": p.get("duration"), "rate": p.get("rate"),
        # a closed loop has one user unless told otherwise (AIPerf's default, and ours)
        "concurrency": p.get("concurrency") or (1 if p["type"] == "concurrency" else None),
        # after a duration both wait 30 s for requests in flight unless told otherwise
        "grace_period": (30.0 if grace is None else float(grace)) if p.get("duration") else grace,
        "cancellation": (float(cancellation.get("rate", 0.0)), float(cancellation.get("delay", 0.0))),
        "excluded": kind == "warmup" if p.get("exclude_from_results") is None else bool(p["exclude_from_results"]),
        "concurrency_ramp": _ramp(p.get("concurrency_ramp")), "rate_ramp": _ramp(p.get("rate_ramp")),
        # a prefill ramp without a prefill cap ramps nothing (AIPerf keeps it, we drop it)
        "prefill_concurrency": p.get("prefill_concurrency"),
        "prefill_ramp": _ramp(p.get("prefill_ramp")) if p.get("prefill_concurrency") else None,
    }
    if p.get("sessions") is not None:
        out["sessions"] = p["sessions"]
    if p["type"] == "user_centric":
        out["users"] = p["users"]
    if p["type"] == "gamma":
        out["smoothness"] = float(p.get("smoothness") or 1.0)
    if p["type"] == "fixed_schedule":
        out["auto_offset"] = p.get("auto_offset", True)
    return out


def _dataset(d: dict[str, Any]) -> dict[str, Any]:
    prompts = d.get("prompts") or {}
    sequence = tuple((distribution(e["isl"]), distribution(e["osl"]), float(e["probability"]))
                     for e in prompts.get("sequence_distribution") or [])
    prefix = d.get("prefix_prompts") or {}
    delay = d.get("turn_delay") or {}
    path = d.get("path")
    out = {"name": d.get("name"), "type": d["type"], "path": path and posixpath.normpath(path), "records": d.get("records") or None,
           "format": d.get("format"), "osl": distribution(prompts.get("osl")),
           "sequence_distribution": sequence or None, "block_size": prompts.get("block_size"),
           "batch_size": prompts.get("batch_size", 1)}
    if d["type"] == "synthetic":
        out.update(entries=d.get("entries", 100),
                   isl=None if sequence else distribution(prompts.get("isl") or {"mean": 550}),
                   prefix=(prefix.get("pool_size", 0), prefix.get("length", 0)),
                   turns=distribution(d.get("turns") or {"mean": 1}),
                   turn_delay=(float(delay.get("mean", 0.0)), float(delay.get("stddev", 0.0))),
                   turn_delay_ratio=float(d.get("turn_delay_ratio", 1.0)))
        images, audio = d.get("images") or {}, d.get("audio") or {}
        if images.get("batch_size"):
            out["images"] = (images["batch_size"], distribution(images.get("width", {"value": 512})),
                             distribution(images.get("height", {"value": 512})), images.get("format", "jpeg"),
                             images.get("source", "noise"))
        if audio.get("batch_size"):
            out["audio"] = (audio["batch_size"], distribution(audio.get("length", {"value": 10.0})),
                            audio.get("format", "wav"), [float(r) for r in audio.get("sample_rates", [16.0])],
                            audio.get("depths", [16]), audio.get("channels", 1))
    return out


def _export_level(artifacts: dict[str, Any]) -> str:
    if "export_level" in artifacts:
        return str(artifacts["export_level"])
    if artifacts.get("raw"):
        return "raw"
    return "summary" if artifacts.get("records") in (False, []) else "records"


def comparable(benchmark: dict[str, Any]) -> dict[str, Any]:
    """What a run does, from a benchmark in canonical snake_case (AIPerf's `config expand --full`
    body or ours): models, endpoint, datasets, phases, SLOs, artifacts, server metrics."""
    models = benchmark["models"]
    if isinstance(models, dict):  # AIPerf's {strategy, items: [{name, weight}]}
        names = [m["name"] for m in models["items"]]
        weights = [m.get("weight") for m in models["items"]]
        selection = {"strategy": models.get("strategy", "round_robin"),
                     "weights": weights if None not in weights else []}
    else:  # ours: the names, and model_selection
        names = list(models)
        selection = {"strategy": "round_robin", "weights": [], **(benchmark.get("model_selection") or {})}
    endpoint = benchmark.get("endpoint") or {}
    metrics = benchmark.get("server_metrics") or {}
    gpu = benchmark.get("gpu_telemetry") or {}
    artifacts = benchmark.get("artifacts") or {}
    return {
        "models": names, "model_selection": selection,
        "endpoint": {"urls": endpoint.get("urls"), "type": endpoint.get("type", "chat"), "path": endpoint.get("path"),
                     "streaming": endpoint.get("streaming", False), "timeout": float(endpoint.get("timeout", 21600)),
                     "extra": endpoint.get("extra") or {},
                     "connection_reuse": endpoint.get("connection_reuse", "pooled")},
        "datasets": [_dataset(d) for d in benchmark.get("datasets") or []],
        "phases": [_phase(p) for p in benchmark.get("phases") or []],
        "slos": {k: float(v) for k, v in (benchmark.get("slos") or {}).items()},
        "artifacts": {"dir": posixpath.normpath(artifacts.get("dir", "artifacts")),
                      "export_level": _export_level(artifacts),
                      "slice_duration": artifacts.get("slice_duration"),
                      "trace": artifacts.get("trace", False),
                      "show_trace_timing": artifacts.get("show_trace_timing", False),
                      "user_files": [(f["path"], f["format"], f["content"]) for f in artifacts.get("user_files") or []]},
        "server_metrics": {"enabled": metrics.get("enabled", True), "urls": metrics.get("urls") or [],
                           "formats": metrics.get("formats") or ["json", "csv"]},
        "gpu_telemetry": {"enabled": gpu.get("enabled", True), "urls": gpu.get("urls") or []},
    }
