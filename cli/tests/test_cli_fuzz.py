"""Fuzzed `aiperf profile` flags and config files (issue 10, the suite): nan, inf, negative,
huge, unicode, bad ports, IPv6, garbage files. The real CLI entry (`aiperf.cli.main.main`) runs
in-process; the only outcomes are exit 0 (accepted) or 2 (a user mistake, one line when it is
ours), never a traceback. Nothing is started: the benchmark the flags describe is handed to a
stand-in for `run_profile`, which checks that it survives `run_config.json` (every service reads
it from there), and `config validate` checks files with the same pipeline `profile --config` uses.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from dataclasses import fields
from typing import Any

import msgspec
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiperf.cli.main import main
from aiperf.cli.profile_options import LocalFlags, ProfileFlags, flag_name
from aiperf.config import Benchmark, CommsOptions, RunConfig

NASTY = ["nan", "NaN", "inf", "-inf", "Infinity", "-1", "0", "-0", "1e400", "-1e400", "1e-400",
         "99999999999999999999999999", "0x10", "1_000", " 5", "", " ", "☃", "Ω≈ç√", "\u202e", "\x00",
         "a:b", "request_latency:nan", "request_latency:-1", "request_latency:inf", ":", "{}", "[]",
         '{"a": NaN}', "http://[::1]:8000", "http://[::1", "[::1]:99999", "http://h:0", "http://h:65536",
         "http://h:-1", "::1", "https://[fe80::1%25eth0]:443/v1", "http://user:pw@h:1", "ftp://h", "h:abc",
         "X-A:b", "Authorization:Bearer x", "mooncake_trace", "chat", "raw", "gamma"]
value = st.one_of(st.sampled_from(NASTY), st.text(max_size=12),
                  st.integers(min_value=-(2**70), max_value=2**70).map(str),
                  st.floats(allow_nan=True, allow_infinity=True).map(repr))

BOOLS = {f.name for cls in (ProfileFlags, LocalFlags) for f in fields(cls)
         if f.type in ("bool | None", "Optional[bool]")}
FLAGS = sorted(flag_name(f.name) for cls in (ProfileFlags, LocalFlags) for f in fields(cls))
NO_URL = ["--url", "127.0.0.1:9"]
"""Given unless the example sets --url; never connected to (nothing starts)."""


@st.composite
def profile_argv(draw: st.DrawFn) -> list[str]:
    argv: list[str] = []
    for flag in draw(st.lists(st.sampled_from(FLAGS), max_size=6)):
        argv.append(flag)
        if flag.removeprefix("--").replace("-", "_") not in BOOLS or draw(st.booleans()):
            argv.append(draw(value))
    return argv


def _run(argv: list[str]) -> tuple[int, str]:
    """`aiperf ARGV` in-process: the exit code (a `SystemExit` from the flag parser included)
    and what it wrote to stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, err.getvalue()


def _accepting(accepted: list[Benchmark]):  # type: ignore[no-untyped-def]
    """A stand-in for `run_profile`: the benchmark must survive run_config.json; exit 0."""

    def run_profile(benchmark: Benchmark, **_: Any) -> int:
        config = RunConfig(run_id="fuzz", comms=CommsOptions(ipc_dir="/tmp"), benchmark=benchmark)
        assert msgspec.json.decode(msgspec.json.encode(config), type=RunConfig) == config
        accepted.append(benchmark)
        return 0

    return run_profile


def _check(code: int, err: str) -> None:
    assert code in (0, 2), (code, err)
    assert "Traceback" not in err, err
    if code == 2 and err.startswith("error: "):
        assert err.count("\n") == 1, err  # our own messages are one line


FLAG_EXAMPLES, FILE_EXAMPLES = 80, 120
"""A `profile` parse takes cyclopts 0.1-0.8 s on a busy 2-core machine (more with every flag
added): the examples fit the per-test timeout (120 s) and the file Pants' 300 s."""


@settings(max_examples=FLAG_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(argv=profile_argv())
def test_fuzzed_profile_flags_exit_0_or_2(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> None:
    import aiperf.cli.profile as profile

    accepted: list[Benchmark] = []
    with monkeypatch.context() as patch:
        patch.setattr(profile, "run_profile", _accepting(accepted))
        code, err = _run(["profile", "-m", "m", *([] if "--url" in argv else NO_URL), *argv])
    _check(code, err)
    assert (code == 0) == bool(accepted), (code, err)


DOCUMENT_KEYS = ["model", "models", "endpoint", "url", "urls", "type", "streaming", "timeout", "dataset",
                 "datasets", "entries", "isl", "osl", "mean", "stddev", "prompts", "phases", "warmup",
                 "profiling", "concurrency", "rate", "requests", "duration", "gracePeriod", "smoothness",
                 "cancellation", "delay", "tokenizer", "artifacts", "exportLevel", "slos", "runtime",
                 "workers", "randomSeed", "apiKey", "headers", "extra", "path", "format", "☃"]
scalar = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                   st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(NASTY), st.text(max_size=8))
tree = st.recursive(scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(DOCUMENT_KEYS), inner, max_size=4)), max_leaves=12)
documents = st.one_of(
    st.fixed_dictionaries({"schemaVersion": st.sampled_from(["2.0", "1.0", 2])},
                          optional={"benchmark": st.dictionaries(st.sampled_from(DOCUMENT_KEYS), tree, max_size=6)}),
    st.dictionaries(st.sampled_from(DOCUMENT_KEYS), tree, max_size=6),
    tree)


LAUGHS = b"\n".join([b"a: &a [" + b",".join([b"x"] * 20) + b"]"] + [
    b"%c: &%c [" % (n, n) + b",".join([b"*%c" % (n - 1)] * 20) + b"]" for n in b"bcdefgh"])
"""A "billion laughs" file: 20^8 values once its aliases are expanded."""


def _dump(document: Any, as_yaml: bool) -> bytes:
    if as_yaml:
        return yaml.safe_dump(document, allow_unicode=True).encode()
    return msgspec.json.encode(document)  # inf and nan become null, as JSON has neither


@settings(max_examples=FILE_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(document=documents, as_yaml=st.booleans(), through_profile=st.integers(0, 3),
       garbage=st.one_of(st.none(), st.binary(max_size=64), st.sampled_from(
           [b"\xff\xfe\x00", b"a: [", b"- - -", b"key: &a [*a]", b"(: &0 [*0]", b"\x00\x00", b"\x80",
            b"!!python/object:os.system {}", b"a: !!binary ^^^", b"{" * 200, b"[" * 5000, LAUGHS])))
def test_fuzzed_config_files_exit_0_or_2(monkeypatch: pytest.MonkeyPatch, document: Any, as_yaml: bool,
                                         through_profile: int, garbage: bytes | None) -> None:
    """`config validate FILE` for every example; `profile --config FILE` for every valid file and
    one in four of the others (it reads files through the same loader, at a parse's cost)."""
    import aiperf.cli.profile as profile

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "config.yaml")
        with open(path, "wb") as fh:
            fh.write(garbage if garbage is not None else _dump(document, as_yaml))
        validated, err = _run(["config", "validate", path])
        _check(validated, err)
        if validated != 0 and through_profile:
            return
        accepted: list[Benchmark] = []
        with monkeypatch.context() as patch:
            patch.setattr(profile, "run_profile", _accepting(accepted))
            code, err = _run(["profile", "--config", path, *NO_URL])
    _check(code, err)
    if validated == 0:  # the file is a valid benchmark: profile takes it (it may lack a model)
        assert code == 0 or "--model" in err, err
