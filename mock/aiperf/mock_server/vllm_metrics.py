"""vLLM-style Prometheus metrics of the mock, derived only from what it served.

Families (all labelled ``model_name``, as vLLM labels them):

- gauges ``vllm:num_requests_running`` (inference requests being answered now),
  ``vllm:num_requests_waiting`` (always 0: the mock never queues) and
  ``vllm:gpu_cache_usage_perc`` (``min(1, running / KV_SLOTS)``, a fraction as in vLLM);
- counters ``vllm:prompt_tokens_total`` (added when a request's prefill is done: just before its
  first token, or before a non-streaming answer), ``vllm:generation_tokens_total`` and
  ``vllm:request_success_total{finished_reason}`` (added when a request finishes, before its last
  bytes are sent, so a client that has its whole answer always sees them counted);
- histograms ``vllm:time_to_first_token_seconds`` (observes each request's scheduled TTFT: exactly
  ``--ttft`` without jitter) and ``vllm:e2e_request_latency_seconds`` (the measured time from the
  request's arrival to its finish), with vLLM's bucket bounds.

Every value lives in the shared counter rows (`aiperf.mock_server.stats`), so a server with several
granian workers reports their sum. A histogram takes ``len(bounds) + 2`` slots: one count per
bucket (not cumulative; the last is ``+Inf``) and the sum in microseconds.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Protocol

KV_SLOTS = 64
"""Requests that fill the mock's pretend KV cache (``vllm:gpu_cache_usage_perc`` reaches 1)."""

TTFT_BOUNDS: tuple[float, ...] = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                  1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
E2E_BOUNDS: tuple[float, ...] = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
                                 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)


class Slots(Protocol):
    """What this module needs of a `StatsBoard`."""

    def add(self, slot: int, n: int = 1) -> None: ...

    def total(self, slot: int) -> int: ...


@dataclass(frozen=True)
class Histogram:
    """One histogram's place in a counter row: ``base`` is its first slot."""

    name: str
    help: str
    bounds: tuple[float, ...]
    base: int

    @property
    def width(self) -> int:
        """Slots it takes: one per bucket, ``+Inf`` and the sum."""
        return len(self.bounds) + 2

    def observe(self, board: Slots, seconds: float) -> None:
        """Count one observation of ``seconds`` (negative values count as 0)."""
        seconds = max(0.0, seconds)
        board.add(self.base + bisect.bisect_left(self.bounds, seconds))
        board.add(self.base + len(self.bounds) + 1, round(seconds * 1e6))

    def lines(self, board: Slots, labels: str) -> list[str]:
        """Its exposition lines: cumulative ``_bucket`` lines, ``_count`` and ``_sum``."""
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        running = 0
        for i, bound in enumerate((*self.bounds, float("inf"))):
            running += board.total(self.base + i)
            le = "+Inf" if bound == float("inf") else repr(bound)
            out.append(f'{self.name}_bucket{{{labels},le="{le}"}} {running}')
        total_us = board.total(self.base + len(self.bounds) + 1)
        out += [f"{self.name}_count{{{labels}}} {running}", f"{self.name}_sum{{{labels}}} {total_us / 1e6!r}"]
        return out


@dataclass(frozen=True)
class VllmSlots:
    """Where the vLLM counters and histograms live in a row, from slot ``base`` on."""

    base: int

    @property
    def prompt_tokens(self) -> int:
        return self.base

    @property
    def generation_tokens(self) -> int:
        return self.base + 1

    def success(self, finish: str) -> int:
        """The ``request_success_total`` slot of ``finish`` (``stop`` or ``length``)."""
        return self.base + (3 if finish == "length" else 2)

    @property
    def ttft(self) -> Histogram:
        return Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                         TTFT_BOUNDS, self.base + 4)

    @property
    def e2e(self) -> Histogram:
        return Histogram("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.",
                         E2E_BOUNDS, self.ttft.base + self.ttft.width)

    @property
    def width(self) -> int:
        """Slots taken by all of them."""
        return self.e2e.base + self.e2e.width - self.base

    def prefill_done(self, board: Slots, *, prompt_tokens: int, ttft_s: float) -> None:
        """A request's first token is due: count its prompt tokens and observe its TTFT."""
        board.add(self.prompt_tokens, prompt_tokens)
        self.ttft.observe(board, ttft_s)

    def finished(self, board: Slots, *, tokens: int, finish: str, latency_s: float) -> None:
        """A request generated all its ``tokens``: count them and it, observe its latency."""
        board.add(self.generation_tokens, tokens)
        board.add(self.success(finish))
        self.e2e.observe(board, latency_s)

    def lines(self, board: Slots, *, running: int, model: str) -> list[str]:
        """The exposition lines of every vLLM family."""
        labels = f'model_name="{_escape(model)}"'
        out: list[str] = []
        gauges = (
            ("vllm:num_requests_running", "Number of requests currently running on GPU.", float(running)),
            ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", 0.0),
            ("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.",
             min(1.0, running / KV_SLOTS)),
        )
        for name, text, value in gauges:
            out += [f"# HELP {name} {text}", f"# TYPE {name} gauge", f"{name}{{{labels}}} {value!r}"]
        counters = (
            ("vllm:prompt_tokens", "Number of prefill tokens processed.", [("", self.prompt_tokens)]),
            ("vllm:generation_tokens", "Number of generation tokens processed.", [("", self.generation_tokens)]),
            ("vllm:request_success", "Count of successfully processed requests.",
             [(',finished_reason="stop"', self.success("stop")),
              (',finished_reason="length"', self.success("length"))]),
        )
        for name, text, series in counters:
            out += [f"# HELP {name}_total {text}", f"# TYPE {name}_total counter"]
            out += [f"{name}_total{{{labels}{extra}}} {float(board.total(slot))!r}" for extra, slot in series]
        out += self.ttft.lines(board, labels)
        out += self.e2e.lines(board, labels)
        return out


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
