"""`ProfileOptions`: the `aiperf profile` flags a run needs, as the services read them.

Flag names and defaults follow NVIDIA AIPerf 0.13. Validation happens once, in the CLI
(`validate()` returns every problem as a one-line message naming its flag).
Secrets are not here: `--api-key` and `--header` values travel in `AIPERF_API_KEY` and
`AIPERF_HEADERS_JSON`.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

EndpointKind = Literal["chat", "completions", "embeddings"]
RateMode = Literal["constant", "poisson", "gamma"]


class ProfileOptions(msgspec.Struct, frozen=True, kw_only=True):
    """One benchmark. `concurrency` alone is a closed loop; `request_rate` alone an open loop;
    both: open loop capped at `concurrency` in flight; `fixed_schedule`: trace timestamps."""

    model: str
    url: str = "http://localhost:8000"
    endpoint_type: EndpointKind = "chat"
    streaming: bool = False
    concurrency: int | None = None
    request_rate: float | None = None
    request_rate_mode: RateMode = "poisson"
    arrival_smoothness: float = 1.0
    request_count: int | None = None
    benchmark_duration: float | None = None
    benchmark_grace_period: float = 30.0
    warmup_request_count: int = 0
    request_timeout_seconds: float = 21600.0
    request_cancellation_rate: float = 0.0
    request_cancellation_delay: float = 0.0
    fixed_schedule: bool = False
    dataset: dict[str, Any] = {}
    tokenizer: str | None = None
    goodput: dict[str, float] = {}
    extra_inputs: dict[str, Any] = {}
    header_names: list[str] = []
    use_legacy_max_tokens: bool = False
    use_server_token_count: bool = False
    random_seed: int | None = None
    ui: Literal["none", "simple"] = "none"

    @property
    def effective_request_count(self) -> int | None:
        """Requests to send in the profiling phase: the flag, or AIPerf's default
        max(10, 2 x concurrency) when neither a count nor a duration nor a schedule is set."""
        if self.request_count is not None:
            return self.request_count
        if self.benchmark_duration is not None or self.fixed_schedule:
            return None
        return max(10, 2 * (self.concurrency or 1))

    def validate(self) -> list[str]:
        """Every user mistake in these options, one line each naming the flag (empty: valid)."""
        problems: list[str] = []

        def need(ok: bool, message: str) -> None:
            if not ok:
                problems.append(message)

        need(bool(self.model.strip()), "--model: must not be empty")
        need(self.url.startswith(("http://", "https://")), f"--url {self.url}: must be an http(s) URL")
        need(self.concurrency is None or self.concurrency >= 1,
             f"--concurrency {self.concurrency}: must be at least 1")
        need(self.request_rate is None or self.request_rate > 0,
             f"--request-rate {self.request_rate}: must be greater than 0")
        need(self.arrival_smoothness > 0, f"--arrival-smoothness {self.arrival_smoothness}: must be > 0")
        need(self.request_count is None or self.request_count >= 1,
             f"--request-count {self.request_count}: must be at least 1")
        need(self.benchmark_duration is None or self.benchmark_duration > 0,
             f"--benchmark-duration {self.benchmark_duration}: must be greater than 0")
        need(self.benchmark_grace_period >= 0,
             f"--benchmark-grace-period {self.benchmark_grace_period}: must not be negative")
        need(self.warmup_request_count >= 0,
             f"--warmup-request-count {self.warmup_request_count}: must not be negative")
        need(self.request_timeout_seconds > 0,
             f"--request-timeout-seconds {self.request_timeout_seconds}: must be greater than 0")
        need(0 <= self.request_cancellation_rate <= 100,
             f"--request-cancellation-rate {self.request_cancellation_rate}: must be a percentage 0-100")
        need(self.request_cancellation_delay >= 0,
             f"--request-cancellation-delay {self.request_cancellation_delay}: must not be negative")
        need(not (self.fixed_schedule and self.request_rate is not None),
             "--fixed-schedule and --request-rate: choose one")
        need(not (self.request_count is not None and self.benchmark_duration is not None),
             "--request-count and --benchmark-duration: choose one stop condition")
        return problems
