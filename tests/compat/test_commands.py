"""Same command, same result (issue 25): AIPerf 0.13.0 command lines run unchanged by both tools,
each against its own mock server with known timing (TTFT 300 ms, 20 ms between tokens, 8 tokens).
Both succeed; the mocks received the same number of requests (warmup and readiness probes
included) and each run reports the same profiling request count; the metrics that measure the
server agree: the minimum time_to_first_token and request_latency within 3%; their medians and
inter_token_latency's within a sanity bound (see `TOLERANCE`). A line whose only difference is a
timing beyond tolerance runs once more and must agree then (see the test).

Every line of `LINES` runs by default (CI too: 32 lines; 5.7 minutes under `./pants test` on this
2-core host, 10-13 minutes beside other heavy work);
`AIPERF_COMMAND_MATRIX=quick` runs the `CI` subset (5 lines, about 1 minute). What keeps it
cheap: one pair of mocks serves every line (request counts are differences of its `/stats`);
the tokenizer both tools read is word-level, which AIPerf tokenizes its 5 MB prompt corpus with
in about 1 s instead of 4 (it does so at every run with a synthetic dataset); AIPerf runs
without its 2 s server-metrics flush period (`AIPERF_ENV`); ours runs during AIPerf's start-up.
AIPerf's own start-up (imports, transformers in each service) is still most of each line's
8-10 s. Sweeps and repeated runs compare each run folder's export with the same folder of the
other's. Not compared: AIPerf's per-phase copies of the exports (`phases/<phase>/`, written with
a warmup), which we do not write.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _oracle import Oracle, find_oracle

from aiperf.mock_server.testing import running_mock

MOCK = ("--ttft-ms", "300", "--itl-ms", "20", "--output-tokens", "8", "--model", "mock")
"""The mocks' known timing; `/v1/models` lists the model the lines name (`--wait-for-model-mode both`)."""
TIMES = {"time_to_first_token": ("min", "p50"), "request_latency": ("min", "p50"), "inter_token_latency": ("p50",)}
"""The metrics that measure the server, and the statistics compared."""
TOLERANCE = {"min": 0.03, "p50": 0.15}
"""Relative tolerance by statistic. The minimum is the server's time plus each tool's least client
overhead: the two agree within 3%. The median also holds each tool's overhead under load, and
AIPerf's is large on a busy 2-core host (TTFT p50 314 ms against the mock's 300 ms and ours 302 ms
alone; 329 ms against ours 307 ms beside other tests): a sanity bound only."""
COMMON = "-m mock --tokenizer {tokenizer} --ui-type none --workers-max 1 --record-processor-service-count 1 " \
         "--random-seed 7"
SHAPE = "--isl 16 --osl 8"
"""Synthetic prompts' shape (AIPerf refuses --isl/--osl with --input-file)."""

LINES: dict[str, str] = {
    # load modes
    "closed-loop": "--url {url} --streaming --concurrency 2 --request-count 10",
    "constant-rate": "--url {url} --streaming --request-rate 20 --request-rate-mode constant --request-count 10",
    "poisson-rate": "--url {url} --streaming --request-rate 20 --request-count 10",
    "gamma-rate": "--url {url} --streaming --request-rate 20 --arrival-pattern gamma --arrival-smoothness 4 "
                  "--request-count 10",
    "rate-with-cap": "--url {url} --streaming --request-rate 30 --concurrency 2 --request-count 10",
    "prefill-cap": "--url {url} --streaming --concurrency 4 --prefill-concurrency 2 --request-count 12",
    # ramps and warmup
    "concurrency-ramp": "--url {url} --streaming --concurrency 4 --concurrency-ramp-duration 0.4 --request-count 12",
    "rate-ramp": "--url {url} --streaming --request-rate 30 --request-rate-ramp-duration 0.5 --request-count 12",
    "warmup-count": "--url {url}/v1 --streaming --concurrency 2 --request-count 8 --warmup-request-count 4",
    "warmup-rate": "--url {url} --streaming --request-rate 20 --request-count 8 --num-warmup-requests 4 "
                   "--warmup-request-rate 40",
    "warmup-concurrency": "--url {url} --streaming --concurrency 2 --request-count 8 --warmup-request-count 3 "
                          "--warmup-concurrency 3",
    # endpoints and URL forms
    "url-v1": "--url {url}/v1 --streaming --concurrency 2 --request-count 8",
    "url-full-path": "--url {url}/v1/chat/completions --streaming --concurrency 2 --request-count 8",
    "url-no-scheme": "--url {hostport} --streaming --concurrency 2 --request-count 8",
    "custom-endpoint": "--url {url}/v1 --custom-endpoint /chat/completions --streaming --concurrency 2 "
                       "--request-count 8",
    "completions": "--url {url} --endpoint-type completions --streaming --concurrency 2 --request-count 8",
    "non-streaming": "--url {url} --concurrency 2 --request-count 8",
    "extra-inputs": "--url {url} --streaming --concurrency 2 --request-count 8 --extra-inputs temperature:0.5 "
                    "--header X-Test:abc --use-legacy-max-tokens",
    # datasets
    "isl-osl-spread": "--url {url} --streaming --concurrency 2 --request-count 8 --isl-stddev 4 --osl-stddev 2",
    "prefix-prompts": "--url {url} --streaming --concurrency 2 --request-count 8 --num-prefix-prompts 2 "
                      "--prefix-prompt-length 8",
    "multi-turn": "--url {url} --streaming --concurrency 2 --request-count 8 --session-turns-mean 2 "
                  "--session-turn-delay-mean 20",
    "single-turn-file": "--url {url} --streaming --concurrency 2 --request-count 6 --input-file {single_turn} "
                        "--custom-dataset-type single_turn",
    "multi-turn-file": "--url {url} --streaming --concurrency 2 --request-count 6 --input-file {multi_turn} "
                       "--custom-dataset-type multi_turn",
    "trace-replay": "--url {url} --streaming --input-file {trace} --custom-dataset-type mooncake_trace "
                    "--fixed-schedule",
    # goodput, sweeps, repeated runs, exports
    "goodput": "--url {url} --streaming --request-rate 20 --request-rate-mode constant --request-count 8 "
               "--goodput 'time_to_first_token:1000 request_latency:2000'",
    "sweep": "--url {url} --streaming --concurrency 1,2 --request-count 6",
    "multi-run": "--url {url} --streaming --concurrency 2 --request-count 6 --num-profile-runs 2",
    "export-summary": "--url {url} --streaming --concurrency 2 --request-count 8 --export-level summary "
                      "--slice-duration 0.5",
    "export-prefix": "--url {url} --streaming --concurrency 2 --request-count 8 --profile-export-prefix run1",
    # readiness probe, trace window
    "wait-for-model": "--url {url} --streaming --concurrency 2 --request-count 8 --wait-for-model-timeout 30 "
                      "--wait-for-model-interval 0.5",
    "wait-for-model-both": "--url {url} --streaming --concurrency 2 --request-count 8 --wait-for-model-timeout 30 "
                           "--wait-for-model-mode both --wait-for-model-interval 0.5",
    "trace-window": "--url {url} --streaming --input-file {trace} --custom-dataset-type mooncake_trace "
                    "--fixed-schedule --fixed-schedule-start-offset 200 --fixed-schedule-end-offset 500",
}
"""AIPerf 0.13.0 command lines (`aiperf profile` arguments; `COMMON` is added)."""

CI = ("closed-loop", "warmup-count", "multi-turn", "trace-replay", "goodput")
"""The quick subset (`AIPERF_COMMAND_MATRIX=quick`)."""

GAPS: dict[str, str] = {}
"""Lines that show a difference not fixed yet (strict xfail: a fix makes them fail until removed)."""

SELECTED = [pytest.param(line, marks=pytest.mark.xfail(reason=GAPS[line], strict=True)) if line in GAPS else line
            for line in (CI if os.environ.get("AIPERF_COMMAND_MATRIX") == "quick" else LINES)]

AIPERF_ENV = {"HF_HUB_OFFLINE": None, "AIPERF_GPU_DEFAULT_DCGM_ENDPOINTS": "http://127.0.0.1:9/metrics",
              "AIPERF_SERVER_METRICS_COLLECTION_FLUSH_PERIOD": "0"}
"""AIPerf's environment: no DCGM to probe, and no 2 s of server-metrics scrapes after the last
request (its default flush period; the server-metrics export is not compared). Neither changes
what a line measures."""


@dataclass(frozen=True)
class Side:
    """One tool's run of a line: exit code, output tail, the requests its mock received, each
    run folder's summary (`profile_export_aiperf.json`, or the `--profile-export-prefix` name)
    by path relative to the artifact dir (ours: read at AIPerf's paths, where a sweep or repeated
    runs leave links to our folders), how many run folders it wrote, and the prefixed file
    names written."""

    code: int
    tail: str
    served: int
    exports: dict[str, dict[str, Any]]
    runs: int
    prefixed: list[str]


PREFIX = "run1"
"""The export prefix of the `export-prefix` line."""


def _files(folder: Path) -> dict[str, str]:
    """Dataset files the lines name, written into `folder`."""
    single = "".join(json.dumps({"text": f"question {i} about the quick brown fox"}) + "\n" for i in range(6))
    multi = "".join(json.dumps({"session_id": f"s{i}", "turns": [{"text": f"hello {i}"}, {"text": "and then?"}]})
                    + "\n" for i in range(3))
    trace = "".join(json.dumps({"timestamp": 100 * i, "input_length": 16, "output_length": 8, "hash_ids": [i]})
                    + "\n" for i in range(8))
    out = {}
    for name, text in (("single_turn", single), ("multi_turn", multi), ("trace", trace)):
        (folder / f"{name}.jsonl").write_text(text)
        out[name] = str(folder / f"{name}.jsonl")
    return out


def _served(url: str) -> int:
    """The requests `url`'s mock has received so far."""
    with urllib.request.urlopen(url + "/stats", timeout=30) as answer:
        return int(json.loads(answer.read())["requests"])


def _summary_name(line: str) -> str:
    return f"{PREFIX}.json" if "--profile-export-prefix" in LINES[line] else "profile_export_aiperf.json"


def _exports(artifacts: Path, line: str) -> dict[str, dict[str, Any]]:
    """Each run folder's summary (AIPerf's per-phase `phases/<phase>/` copies left out: not built;
    folders reached through links are not searched)."""
    return {str(p.parent.relative_to(artifacts)): json.loads(p.read_text())
            for p in sorted(artifacts.rglob(_summary_name(line))) if "phases" not in p.parts}


def _exports_at(artifacts: Path, line: str, folders: list[str]) -> dict[str, dict[str, Any]]:
    """The summaries at `folders` (AIPerf's run folders) under `artifacts`, where there is one."""
    found = {folder: artifacts / folder / _summary_name(line) for folder in folders}
    return {folder: json.loads(path.read_text()) for folder, path in found.items() if path.is_file()}


def _prefixed(artifacts: Path) -> list[str]:
    return sorted(p.name for p in artifacts.glob(f"{PREFIX}*") if p.is_file())


def _argv(line: str, url: str, tokenizer: Path, files: dict[str, str]) -> list[str]:
    shape = "" if "--input-file" in LINES[line] else SHAPE
    text = f"{LINES[line]} {COMMON} {shape}".format(url=url, hostport=url.removeprefix("http://"), tokenizer=tokenizer,
                                            **files)
    return shlex.split(text)


@dataclass(frozen=True)
class Setting:
    """What every line uses: the oracle, the work folder, a tokenizer both read, dataset files,
    and the two mocks' URLs (AIPerf's, ours)."""

    oracle: Oracle
    work: Path
    tokenizer: Path
    files: dict[str, str]
    mocks: tuple[str, str]


@pytest.fixture(scope="module")
def setting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setting]:
    """`AIPERF_COMMAND_MATRIX_DIR` keeps the runs' folders there."""
    oracle = find_oracle()
    kept = os.environ.get("AIPERF_COMMAND_MATRIX_DIR")
    work = Path(kept) if kept else tmp_path_factory.mktemp("matrix")
    work.mkdir(parents=True, exist_ok=True)
    tokenizer = oracle.make_tokenizer(work / "word-tokenizer", words=True)
    with running_mock(*MOCK) as theirs_mock, running_mock(*MOCK) as ours_mock:
        yield Setting(oracle, work, tokenizer, _files(work), (theirs_mock.url, ours_mock.url))


def _run_line(setting: Setting, line: str, attempt: str) -> tuple[Side, Side]:
    """Both tools on `line`, each against its own mock, started together: ours is done before
    AIPerf's start-up is, so neither measures while the other does (a busy CPU is client
    overhead in every latency). One line at a time, for the same reason. The mocks serve every
    line; a side's request count is what its mock received during the line. The artifact dirs
    are `<work>/<line>/<attempt>/{theirs,ours}`."""
    work, tokenizer, files = setting.work, setting.tokenizer, setting.files
    theirs_url, ours_url = setting.mocks
    before = _served(theirs_url), _served(ours_url)
    theirs_dir, ours_dir = work / line / attempt / "theirs", work / line / attempt / "ours"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "AIPERF_GPU_DEFAULT_DCGM_ENDPOINTS":
           "http://127.0.0.1:9/metrics"}
    ours = subprocess.Popen([sys.executable, "-m", "aiperf.cli", "profile",
                             *_argv(line, ours_url, tokenizer, files), "--artifact-dir", str(ours_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    theirs = setting.oracle.run("profile", *_argv(line, theirs_url, tokenizer, files), "--artifact-dir",
                                str(theirs_dir), cwd=work, timeout=300, env=AIPERF_ENV)
    ours_out, _ = ours.communicate(timeout=300)
    their_exports = _exports(theirs_dir, line)
    return (Side(theirs.returncode, (theirs.stdout + theirs.stderr)[-3000:], _served(theirs_url) - before[0],
                 their_exports, len(their_exports), _prefixed(theirs_dir)),
            Side(ours.returncode, ours_out[-3000:], _served(ours_url) - before[1],
                 _exports_at(ours_dir, line, list(their_exports)), len(_exports(ours_dir, line)), _prefixed(ours_dir)))


def _stat(export: dict[str, Any], tag: str, stat: str) -> float | None:
    stats = export.get(tag)
    return float(stats[stat]) if isinstance(stats, dict) and stats.get(stat) is not None else None


def _same_counts(line: str, theirs: Side, ours: Side) -> None:
    """Both succeeded, the same requests reached each mock, the same run folders (and prefixed
    files), the same request counts in each."""
    assert theirs.code == 0, f"AIPerf failed on {line}: {theirs.tail}"
    assert ours.code == 0, f"ours failed on {line}: {ours.tail}"
    assert ours.served == theirs.served, (ours.served, theirs.served)
    assert list(ours.exports) == list(theirs.exports), (list(ours.exports), list(theirs.exports))
    assert ours.runs == theirs.runs, (ours.runs, theirs.runs)
    assert ours.prefixed == theirs.prefixed
    for folder, expected in theirs.exports.items():
        got = ours.exports[folder]
        assert got["request_count"]["avg"] == expected["request_count"]["avg"], folder
        if "good_request_count" in expected:  # every request meets the SLOs of the goodput line
            assert got["good_request_count"]["avg"] == expected["good_request_count"]["avg"], folder


def _timing_differences(theirs: Side, ours: Side) -> list[str]:
    """The server-measuring statistics that differ beyond `TOLERANCE`, one line each."""
    out = []
    for folder, expected in theirs.exports.items():
        for tag, stats in TIMES.items():
            for stat in stats:
                want, have = _stat(expected, tag, stat), _stat(ours.exports[folder], tag, stat)
                if want is not None and have is not None and abs(have - want) > TOLERANCE[stat] * want:
                    out.append(f"{folder or '.'} {tag} {stat}: ours {have:.2f}, AIPerf {want:.2f}")
    return out


@pytest.mark.timeout(600)
@pytest.mark.parametrize("line", SELECTED)
def test_the_same_command_gives_the_same_result(setting: Setting, line: str) -> None:
    """A timing beyond tolerance runs the line once more (a busy host's scheduling delay is
    client overhead, in either tool); it fails when the second run differs too. Counts never
    get a second run."""
    theirs, ours = _run_line(setting, line, "run")
    _same_counts(line, theirs, ours)
    first = _timing_differences(theirs, ours)
    if not first:
        return
    theirs, ours = _run_line(setting, line, "rerun")
    _same_counts(line, theirs, ours)
    again = _timing_differences(theirs, ours)
    assert not again, f"{line}: timing beyond tolerance twice: first {first}; then {again}"
