"""`aiperf demo`: the bundled mock server plus a streaming `aiperf profile` against it."""

from __future__ import annotations

import sys

from aiperf.cli.profile import run_profile
from aiperf.config import ProfileOptions
from aiperf.mock_server.testing import running_mock

MOCK_FLAGS = ("--ttft-ms", "40", "--itl-ms", "8", "--output-tokens", "64")


def run_demo(*, concurrency: int, request_count: int, artifact_dir: str, t0_wall_ns: int) -> int:
    """Start the mock (TTFT 40 ms, ITL 8 ms, 64 tokens), profile it, stop it."""
    print(f"starting the mock LLM server ({' '.join(MOCK_FLAGS)})", file=sys.stderr)
    with running_mock(*MOCK_FLAGS) as server:
        options = ProfileOptions(
            model="mock-model", url=server.url, endpoint_type="chat", streaming=True,
            concurrency=concurrency, request_count=request_count, random_seed=42,
            dataset={"isl": 128, "osl": 64}, ui="simple" if sys.stdout.isatty() else "none")
        return run_profile(options, headers={}, api_key=None, artifact_dir=artifact_dir,
                           workers_max=None, record_processors=None, t0_wall_ns=t0_wall_ns)
