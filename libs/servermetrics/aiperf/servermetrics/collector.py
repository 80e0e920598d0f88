"""Scrapes every endpoint in rounds and remembers which rounds bound each phase.

A round scrapes all endpoints at once; it is stamped with the wall clock before its first request
(`sent_ns`) and after its last answer (`recv_ns`). `run` takes a baseline round, then one every
`interval_s`; `phase_started`/`phase_ended` mark the phase boundaries (`phase_ended` takes a
round of its own, so a phase ends on a scrape made after its last response arrived, and takes
up to `END_ATTEMPTS` rounds, `retry_s` apart, while an endpoint that answered before fails in
it: a loaded server's scrape that timed out, or a name lookup refused for a moment while the
cluster's DNS reloads, must not cost the phase its end); `finish` takes the last round and
closes any phase still open. A phase starts at the end round of the phase before it, else at
the last round answered before it started (the baseline at worst): before the wall-clock time
the phase began (`phase_started(at_ns=...)`, the timing-manager's stamp) when given, else
before the collector heard of it (which may be late on a loaded host).

Scrape failures never raise: a failed endpoint is recorded in its round (the export lists it)
and logged once per endpoint at warning.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import anyio
import anyio.abc
import structlog

from aiperf.servermetrics.parse import ExpositionError, Family, parse_metrics

if TYPE_CHECKING:
    import urllib.request

log = structlog.get_logger("aiperf.servermetrics")

END_ATTEMPTS = 3
"""Rounds a phase's end may take while an endpoint fails in them (see the module doc)."""


class Fetch(Protocol):
    """GETs `url` and returns its body as text; raises `OSError`, `TimeoutError` or
    `FetchError` when it cannot."""

    async def __call__(self, url: str, *, timeout_s: float) -> str: ...


class FetchError(Exception):
    """The endpoint answered, but not with metrics (an HTTP error status)."""


@dataclass(frozen=True)
class Round:
    """One scrape of every endpoint: each endpoint's families, or why it failed."""

    sent_ns: int
    recv_ns: int
    results: dict[str, dict[str, Family] | str]


@dataclass
class PhaseWindow:
    """The rounds (indexes into `ServerMetricsCollector.rounds`) bounding one phase, and its
    wall-clock start and end as the collector saw them."""

    name: str
    start_round: int
    start_ns: int
    end_round: int | None = None
    end_ns: int | None = None


@dataclass
class EndpointInfo:
    """Per-endpoint fetch bookkeeping for the export's `summary.endpoint_info`."""

    fetches: int = 0
    failures: int = 0
    first_ns: int = 0
    last_ns: int = 0
    latency_ns: int = 0
    last_error: str = ""


class ServerMetricsCollector:
    """See the module doc. `fetch` does the HTTP; `wall_ns` is the clock (injected for tests).
    `on_round` is told every round as it is taken; with `keep_families` false the rounds kept
    in `rounds` hold no families (`{}` for an endpoint that answered): for a consumer that
    takes what it needs from `on_round` (GPU telemetry, scraped every third of a second).
    `warn_failures` false leaves the warning about a failing endpoint to the consumer."""

    def __init__(self, *, endpoints: Sequence[str], fetch: Fetch, interval_s: float, timeout_s: float = 5.0,
                 wall_ns: Callable[[], int] = time.time_ns, on_round: Callable[[Round], None] | None = None,
                 keep_families: bool = True, warn_failures: bool = True, retry_s: float | None = None) -> None:
        self.endpoints = list(dict.fromkeys(endpoints))
        self._fetch, self._interval, self._timeout, self._wall = fetch, interval_s, timeout_s, wall_ns
        self._retry = interval_s if retry_s is None else retry_s
        self._on_round, self._keep = on_round, keep_families
        self._warned: set[str] = set() if warn_failures else set(self.endpoints)
        self.rounds: list[Round] = []
        self.phases: dict[str, PhaseWindow] = {}
        self.info = {url: EndpointInfo() for url in self.endpoints}
        self._lock = anyio.Lock()

    async def scrape(self) -> int:
        """Take one round (after any round in progress); returns its index."""
        async with self._lock:
            sent = self._wall()
            results: dict[str, dict[str, Family] | str] = {}
            async with anyio.create_task_group() as tg:
                for url in self.endpoints:
                    tg.start_soon(self._one, url, results)
            taken = Round(sent_ns=sent, recv_ns=self._wall(), results=results)
            if self._on_round is not None:
                self._on_round(taken)
            if not self._keep:
                taken = Round(sent_ns=taken.sent_ns, recv_ns=taken.recv_ns,
                              results={url: {} if isinstance(r, dict) else r for url, r in results.items()})
            self.rounds.append(taken)
            return len(self.rounds) - 1

    async def _one(self, url: str, results: dict[str, dict[str, Family] | str]) -> None:
        info = self.info[url]
        start = self._wall()
        try:
            with anyio.fail_after(self._timeout):
                text = await self._fetch(url, timeout_s=self._timeout)
            results[url] = parse_metrics(text)
        except (OSError, TimeoutError, FetchError, ExpositionError) as exc:
            # The socket's timeout ("timed out") and ours (an empty TimeoutError) race: one word.
            why = "timed out" if isinstance(exc, TimeoutError) else str(exc) or type(exc).__name__
            results[url] = info.last_error = why
            info.failures += 1
            if url not in self._warned:
                self._warned.add(url)
                log.warning("server_metrics.scrape_failed", endpoint=url, error=why,
                            note="the benchmark goes on; the export lists the endpoint's errors")
        end = self._wall()
        info.fetches += 1
        info.first_ns = info.first_ns or start
        info.last_ns = end
        info.latency_ns += end - start

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Baseline round, then (started) one round every `interval_s` until cancelled."""
        await self.scrape()
        task_status.started()
        while True:
            await anyio.sleep(self._interval)
            await self.scrape()

    def phase_started(self, name: str, *, at_ns: int | None = None) -> None:
        """Phase `name` began at wall-clock time `at_ns` (None or 0: now); a repeated call is
        ignored."""
        if name in self.phases or not self.rounds:
            return
        now = at_ns or self._wall()
        previous = [p for p in self.phases.values() if p.end_round is not None]
        if previous:
            start = previous[-1].end_round
        else:
            answered = [i for i, r in enumerate(self.rounds) if r.recv_ns <= now]
            start = answered[-1] if answered else 0
        assert start is not None
        self.phases[name] = PhaseWindow(name=name, start_round=start, start_ns=now)

    async def phase_ended(self, name: str) -> None:
        """Phase `name` ended (every response is in): take its end round."""
        phase = self.phases.get(name)
        if phase is None or phase.end_round is not None:
            return
        phase.end_ns = self._wall()
        answered = {url for url, info in self.info.items() if info.fetches > info.failures}
        for attempt in range(END_ATTEMPTS):
            if attempt:
                await anyio.sleep(self._retry)
            phase.end_round = await self.scrape()
            if all(isinstance(got, dict) for url, got in self.rounds[phase.end_round].results.items()
                   if url in answered):
                break

    async def finish(self) -> None:
        """The last round; every phase still open ends on it."""
        last = await self.scrape()
        for phase in self.phases.values():
            if phase.end_round is None:
                phase.end_round, phase.end_ns = last, self.rounds[last].sent_ns


def _direct_opener() -> urllib.request.OpenerDirector:
    """A urllib opener that ignores proxy variables (as aiohttp's default session does)."""
    import urllib.request

    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass
class HttpFetch:
    """`Fetch` over the standard library's HTTP client, each GET in a worker thread, so the
    caller's event loop never waits on the network. Chosen over aiohttp for what it costs to
    start: ~0.02 s of imports instead of ~0.3 s (aiohttp also builds its TLS contexts at import),
    in the `aiperf` process itself on the way to a run's first request. A scrape is one GET every
    `interval` per endpoint: a connection per GET is no cost worth a pool. Like aiohttp's default
    session it ignores proxy variables and follows redirects; `headers` go with every GET. A
    cancelled caller abandons its thread, which ends at the socket timeout (`timeout_s`)."""

    headers: dict[str, str] = field(default_factory=dict)
    _opener: urllib.request.OpenerDirector | None = None

    async def __aenter__(self) -> HttpFetch:
        # urllib.request (http.client and email with it: ~15 ms of CPU) is imported in a worker
        # thread here, at the first scrape beside the services' start-up, not by the importer.
        self._opener = await anyio.to_thread.run_sync(_direct_opener)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._opener = None

    async def __call__(self, url: str, *, timeout_s: float) -> str:
        assert self._opener is not None, "use HttpFetch as an async context manager"
        return await anyio.to_thread.run_sync(self._get, self._opener, url, timeout_s, abandon_on_cancel=True)

    def _get(self, opener: urllib.request.OpenerDirector, url: str, timeout_s: float) -> str:
        import http.client
        import urllib.error
        import urllib.request

        request = urllib.request.Request(url, headers=self.headers)
        try:
            with opener.open(request, timeout=timeout_s) as response:
                body: bytes = response.read()
                charset = response.headers.get_content_charset() or "utf-8"
        except urllib.error.HTTPError as exc:
            exc.close()
            raise FetchError(f"HTTP {exc.code}") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, OSError):  # refused, unreachable, TLS, timed out: as it is
                raise exc.reason from None
            raise FetchError(str(exc.reason)) from None
        except http.client.HTTPException as exc:  # a malformed or cut-short answer
            raise FetchError(str(exc) or type(exc).__name__) from None
        try:
            return body.decode(charset, errors="replace")
        except LookupError:  # an unknown charset in Content-Type
            return body.decode("utf-8", errors="replace")
