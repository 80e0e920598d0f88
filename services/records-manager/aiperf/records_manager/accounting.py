"""The accounting line: every credit issued is accounted for, per phase."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from aiperf.messages import Phase, PhaseAccounting


def balance_problems(phases: Mapping[Phase, PhaseAccounting], records_seen: Mapping[Phase, int], *,
                     records_may_be_lost: bool = False) -> list[str]:
    """Why the accounting does not balance (empty list: it does).

    Per phase: issued == ok + failed + cancelled + lost, returned + lost == issued, and one
    record arrived per returned credit, plus at most one per lost credit (a credit whose return
    was lost on the wire had its request made). With `records_may_be_lost` (a pod and its
    record-processors were lost) fewer records than returned credits is not a problem: the
    shortfall is reported by `missing_records` instead."""
    problems = []
    for phase, c in phases.items():
        settled = c.ok + c.failed + c.cancelled + c.lost
        if settled != c.issued:
            problems.append(f"{phase}: issued {c.issued} != ok+failed+cancelled+lost {settled}")
        if c.returned + c.lost != c.issued:
            problems.append(f"{phase}: returned {c.returned} + lost {c.lost} != issued {c.issued}")
        seen = records_seen.get(phase, 0)
        if seen > c.returned + c.lost or (seen < c.returned and not records_may_be_lost):
            lost = f" (+ {c.lost} lost)" if c.lost else ""
            problems.append(f"{phase}: {seen} records for {c.returned} returned credits{lost}")
    return problems


def missing_records(phases: Mapping[Phase, PhaseAccounting], records_seen: Mapping[Phase, int]) -> dict[Phase, int]:
    """Per phase, returned credits whose record never arrived (lost with their pod)."""
    out = {p: c.returned - records_seen.get(p, 0) for p, c in phases.items()}
    return {p: n for p, n in out.items() if n > 0}


def with_response_errors(phases: Mapping[Phase, PhaseAccounting],
                         response_errors: Mapping[Phase, int]) -> dict[Phase, PhaseAccounting]:
    """The accounting where `ok` means a valid response: per phase, the requests the worker
    returned as ok whose response held an error or no content (`MetricRecord.response_error`)
    move from ok to failed. The balance is unchanged."""
    out = {}
    for phase, c in phases.items():
        moved = min(response_errors.get(phase, 0), c.ok)
        out[phase] = msgspec.structs.replace(c, ok=c.ok - moved, failed=c.failed + moved) if moved else c
    return out


def accounting_line(phases: Mapping[Phase, PhaseAccounting],
                    response_errors: Mapping[Phase, int] | None = None) -> str:
    """One line per phase: `profiling: issued 100 = ok 97 + failed 3 + cancelled 0`, naming the
    failed that were lost with their worker or answered with an error in a 2xx response."""
    lines = []
    for phase, c in phases.items():
        notes = []
        if c.lost:
            notes.append(f"{c.lost} lost with their worker")
        if answered := (response_errors or {}).get(phase, 0):
            notes.append(f"{answered} answered without valid content")
        lines.append(f"{phase}: issued {c.issued} = ok {c.ok} + failed {c.failed + c.lost} + cancelled {c.cancelled}"
                     + (f" (of the failed, {'; '.join(notes)})" if notes else ""))
    return "; ".join(lines)
