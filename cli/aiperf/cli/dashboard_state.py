"""What `--ui dashboard` shows, kept apart from how it is drawn (`aiperf.cli.dashboard`).

Sources, all local to the `aiperf profile` process: the event bus (phase start/end and the
records-manager's progress), the controller (its state and its registry of services, with the
last heartbeat of each), `profile_export.jsonl` as the records-manager streams it (per-request
TTFT, ITL, latency and errors, read as it grows) and the service logs in `<artifact_dir>/logs`.
Nothing here blocks or touches the credit path; reading the files is bounded per poll.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from aiperf.messages import (
    Event,
    Phase,
    PhaseComplete,
    PhaseSendingComplete,
    PhaseStarted,
    Progress,
    SystemState,
)
from aiperf.progress import PhaseProgress, RunProgress

READ_LIMIT = 4 << 20
"""Bytes read from one file per poll: a burst of records is caught up over a few polls."""

RATE_WINDOW_S = 5.0
"""Requests/s is the completions of the last this many seconds."""

METRICS = (("time_to_first_token", "TTFT"), ("inter_token_latency", "ITL"), ("request_latency", "Latency"))
"""Per-request metrics shown with running percentiles: (jsonl tag, label); all in ms."""


class LineTail:
    """The complete lines appended to one file since the last `read` (a cut last line waits
    for its end). A missing file reads as nothing; a file that shrank is read from its start."""

    def __init__(self, path: Path, *, limit: int = READ_LIMIT) -> None:
        self.path, self._limit = path, limit
        self._offset, self._rest = 0, b""

    def read(self) -> list[bytes]:
        """New complete lines, without their newline."""
        try:
            with open(self.path, "rb") as f:
                size = f.seek(0, 2)
                if size < self._offset:
                    self._offset, self._rest = 0, b""
                f.seek(self._offset)
                data = f.read(self._limit)
        except FileNotFoundError:
            return []
        self._offset += len(data)
        *lines, self._rest = (self._rest + data).split(b"\n")
        return [line for line in lines if line.strip()]


class PhaseView:
    """One phase as the dashboard shows it: a live view of the run's folded progress
    (`aiperf.progress.RunProgress`, read anew on every access) plus the samples of its count
    that give the recent rate; times on the monotonic clock."""

    def __init__(self, state: DashboardState, phase: Phase) -> None:
        self._state, self._phase = state, phase
        self.samples: deque[tuple[float, int]] = deque(maxlen=256)

    @property
    def progress(self) -> PhaseProgress:
        """The phase's progress now."""
        found = self._state.progress.phase(self._phase)
        assert found is not None  # a view exists only for a phase the progress has
        return found

    @property
    def completed(self) -> int:
        return self.progress.completed

    @property
    def errors(self) -> int:
        return self.progress.errors

    @property
    def expected(self) -> int | None:
        return self.progress.expected

    def elapsed(self, now: float) -> float:
        return self.progress.elapsed(now)

    def rate(self, now: float) -> float:
        """Requests/s over the last `RATE_WINDOW_S` (the whole phase once it ended)."""
        progress = self.progress
        if progress.ended is not None or not self.samples:
            elapsed = progress.elapsed(now)
            return progress.completed / elapsed if elapsed > 0 else 0.0
        recent = [(t, n) for t, n in self.samples if now - t <= RATE_WINDOW_S]
        first_t, first_n = recent[0] if len(recent) > 1 else (progress.started, 0)
        span = now - first_t
        return (progress.completed - first_n) / span if span > 0 else 0.0

    def fraction(self, now: float) -> float | None:
        """How far it is (0..1): by count when known, else by time against its duration."""
        return self.progress.fraction(now)


@dataclass
class MetricValues:
    """Every value of one per-request metric seen so far in one phase."""

    values: list[float] = field(default_factory=list)

    def percentiles(self) -> dict[str, float] | None:
        if not self.values:
            return None
        p50, p90, p99 = np.percentile(self.values, [50, 90, 99])
        return {"avg": float(np.mean(self.values)), "p50": float(p50), "p90": float(p90), "p99": float(p99)}


class DashboardState:
    """The model behind the dashboard; every method is cheap and never blocks."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, log_lines: int = 8) -> None:
        self.clock = clock
        self.started = clock()
        self.state = SystemState.INITIALIZING
        self.progress = RunProgress()
        self.phases: dict[Phase, PhaseView] = {}
        self.metrics: dict[Phase, dict[str, MetricValues]] = {}
        self.records: Counter[Phase] = Counter()
        self.errors: Counter[str] = Counter()
        self.logs: deque[str] = deque(maxlen=log_lines)

    def apply(self, event: Event) -> None:
        """A phase or progress broadcast (others are ignored), folded by `RunProgress`."""
        now = self.clock()
        self.progress = self.progress.apply(event, now)
        if isinstance(event, PhaseStarted | PhaseSendingComplete | PhaseComplete | Progress) \
                and event.phase not in self.phases:
            self.phases[event.phase] = PhaseView(self, event.phase)
        if isinstance(event, Progress):
            self.phases[event.phase].samples.append((now, event.completed))

    @property
    def current(self) -> Phase | None:
        """The phase that started last."""
        current = self.progress.current
        return current.phase if current is not None else None

    def add_records(self, lines: Iterable[bytes]) -> None:
        """Lines of profile_export.jsonl: their metric values and errors (unreadable lines are
        skipped: the export itself is the records-manager's to get right)."""
        for line in lines:
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(record, dict):
                continue
            phase = _phase_of(record.get("metadata") or {})
            self.records[phase] += 1
            error = record.get("error")
            if isinstance(error, dict):
                self.errors[_error_kind(error)] += 1
                continue
            metrics = record.get("metrics") or {}
            values = self.metrics.setdefault(phase, {})
            for tag, _ in METRICS:
                entry = metrics.get(tag)
                value = entry.get("value") if isinstance(entry, dict) else None
                if isinstance(value, int | float) and math.isfinite(value):
                    values.setdefault(tag, MetricValues()).values.append(float(value))

    def add_log_lines(self, lines: Iterable[bytes | str]) -> None:
        """Service log lines (JSON from structlog, or plain text), shortened for one row each."""
        for line in lines:
            text = line.decode(errors="replace") if isinstance(line, bytes) else line
            if text.strip():
                self.logs.append(log_row(text.strip()))


def _phase_of(meta: dict[str, Any]) -> Phase:
    try:
        return Phase(meta.get("benchmark_phase", Phase.PROFILING))
    except ValueError:
        return Phase.PROFILING


def _error_kind(error: dict[str, Any]) -> str:
    code, kind = error.get("code"), error.get("type") or "error"
    return f"{kind} ({code})" if code is not None else str(kind)


def log_row(text: str) -> str:
    """`HH:MM:SS level service: event key=value ...` from a structlog JSON line; other text as is."""
    try:
        entry = json.loads(text)
    except ValueError:
        return text
    if not isinstance(entry, dict) or "event" not in entry:
        return text
    stamp = str(entry.pop("timestamp", ""))[11:19]
    level = str(entry.pop("level", ""))
    service = str(entry.pop("service", ""))
    event = str(entry.pop("event"))
    rest = " ".join(f"{k}={v}" for k, v in entry.items())
    return " ".join(part for part in (stamp, level, f"{service}:" if service else "", event, rest) if part)
