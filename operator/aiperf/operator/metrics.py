"""The operator's Prometheus metrics: a few counters, rendered in the text exposition format.

    metrics = Metrics()
    metrics.reconciled("create")
    metrics.failed("create")
    metrics.entered_phase("Running")
    text = metrics.render()          # what GET /metrics answers

Counters only ever grow; label values are the handler names and `status.phase` values the
operator writes. Thread-safe: kopf and the HTTP server may run in different threads.
"""

from __future__ import annotations

import threading
from collections import Counter

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_HELP = {
    "aiperf_operator_reconciles_total": ("counter", "Handler invocations that finished, by handler"),
    "aiperf_operator_errors_total": ("counter", "Handler invocations that raised, by handler"),
    "aiperf_operator_runs_total": ("counter", "AIPerfJob phase transitions written, by the phase entered"),
}


class Metrics:
    """Counters of reconciles, errors and phase transitions (see the module doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reconciles: Counter[str] = Counter()
        self._errors: Counter[str] = Counter()
        self._phases: Counter[str] = Counter()

    def reconciled(self, handler: str) -> None:
        """Count one finished invocation of `handler`."""
        with self._lock:
            self._reconciles[handler] += 1

    def failed(self, handler: str) -> None:
        """Count one invocation of `handler` that raised (a retry or a permanent failure)."""
        with self._lock:
            self._errors[handler] += 1

    def entered_phase(self, phase: str) -> None:
        """Count one run entering `phase` (written to `status.phase`)."""
        with self._lock:
            self._phases[phase] += 1

    def value(self, name: str, label: str) -> int:
        """The current value of one counter (`reconciles`, `errors` or `runs`) for `label`."""
        table = {"reconciles": self._reconciles, "errors": self._errors, "runs": self._phases}[name]
        with self._lock:
            return table[label]

    def render(self) -> str:
        """All counters in the Prometheus text format (version 0.0.4), sorted by label."""
        with self._lock:
            series = {"aiperf_operator_reconciles_total": ("handler", dict(self._reconciles)),
                      "aiperf_operator_errors_total": ("handler", dict(self._errors)),
                      "aiperf_operator_runs_total": ("phase", dict(self._phases))}
        lines: list[str] = []
        for name, (label, values) in series.items():
            kind, text = _HELP[name]
            lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
            lines += [f'{name}{{{label}="{_escape(key)}"}} {count}' for key, count in sorted(values.items())]
        return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
