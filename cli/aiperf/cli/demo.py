"""`aiperf demo`: the bundled mock server plus a streaming `aiperf profile` against it."""

from __future__ import annotations

import dataclasses
import sys

from aiperf.cli.benchmark_flags import build_benchmark
from aiperf.cli.profile import EXIT_USER_ERROR, run_profile
from aiperf.cli.profile_options import LocalFlags, ProfileFlags
from aiperf.config import ConfigError
from aiperf.mock_server.testing import running_mock

MOCK_FLAGS = ("--ttft-ms", "40", "--itl-ms", "8", "--output-tokens", "64")

DEMO_FLAGS = ProfileFlags(model=["mock-model"], streaming=True, concurrency=4, request_count=200, random_seed=42,
                          isl=128, osl=64)
"""What the demo runs when no flag says otherwise."""
DEMO_ARTIFACT_DIR = "artifacts/demo"


def demo_flags(flags: ProfileFlags, local: LocalFlags) -> tuple[ProfileFlags, LocalFlags]:
    """The given profile flags over the demo's defaults (`DEMO_FLAGS`, artifacts/demo)."""
    given = {f.name: v for f in dataclasses.fields(flags) if (v := getattr(flags, f.name)) is not None}
    if "benchmark_duration" in given:  # a duration replaces the demo's count, as on the command line
        given.setdefault("request_count", None)
    merged = dataclasses.replace(DEMO_FLAGS, **given)
    if local.artifact_dir is None:
        local = dataclasses.replace(local, artifact_dir=DEMO_ARTIFACT_DIR)
    return merged, local


def run_demo(flags: ProfileFlags, local: LocalFlags, *, t0_wall_ns: int, log_level: str = "warning") -> int:
    """Start the mock (TTFT 40 ms, ITL 8 ms, 64 tokens), profile it with `flags` over the demo's
    defaults, stop it. `--url` is refused: the demo benchmarks its own mock server."""
    if flags.url is not None:
        print("error: --url: the demo benchmarks its own mock server (use aiperf profile for another)",
              file=sys.stderr)
        return EXIT_USER_ERROR
    flags, local = demo_flags(flags, local)
    try:
        build_benchmark(flags, local)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    print(f"starting the mock LLM server ({' '.join(MOCK_FLAGS)})", file=sys.stderr)
    with running_mock(*MOCK_FLAGS) as server:
        built = build_benchmark(dataclasses.replace(flags, url=[server.url]), local)
        return run_profile(built.benchmark, secrets=built.secrets, t0_wall_ns=t0_wall_ns, log_level=log_level)
