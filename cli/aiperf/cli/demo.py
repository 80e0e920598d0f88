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


def run_demo(*, concurrency: int, request_count: int, artifact_dir: str, t0_wall_ns: int) -> int:
    """Start the mock (TTFT 40 ms, ITL 8 ms, 64 tokens), profile it, stop it."""
    flags = ProfileFlags(model="mock-model", streaming=True, concurrency=concurrency,
                         request_count=request_count, random_seed=42, isl=128, osl=64)
    try:
        build_benchmark(flags, LocalFlags(artifact_dir=artifact_dir))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    print(f"starting the mock LLM server ({' '.join(MOCK_FLAGS)})", file=sys.stderr)
    with running_mock(*MOCK_FLAGS) as server:
        built = build_benchmark(dataclasses.replace(flags, url=[server.url]), LocalFlags(artifact_dir=artifact_dir))
        return run_profile(built.benchmark, secrets=built.secrets, t0_wall_ns=t0_wall_ns)
