"""The accounting line: every credit issued is accounted for, per phase."""

from __future__ import annotations

from typing import Any

PhaseCounts = dict[str, Any]


def balance_problems(phases: dict[str, PhaseCounts], records_seen: dict[str, int], *,
                     records_may_be_lost: bool = False) -> list[str]:
    """Why the accounting does not balance (empty list: it does).

    Per phase: issued == ok + failed + cancelled + lost, returned + lost == issued, and one
    record arrived per returned credit. With `records_may_be_lost` (a pod and its
    record-processors were lost) fewer records than returned credits is not a problem: the
    shortfall is reported by `missing_records` instead; more records never balance."""
    problems = []
    for phase, c in phases.items():
        issued, returned, lost = c.get("issued", 0), c.get("returned", 0), c.get("lost", 0)
        settled = c.get("ok", 0) + c.get("failed", 0) + c.get("cancelled", 0) + lost
        if settled != issued:
            problems.append(f"{phase}: issued {issued} != ok+failed+cancelled+lost {settled}")
        if returned + lost != issued:
            problems.append(f"{phase}: returned {returned} + lost {lost} != issued {issued}")
        seen = records_seen.get(phase, 0)
        if seen > returned or (seen < returned and not records_may_be_lost):
            problems.append(f"{phase}: {seen} records for {returned} returned credits")
    return problems


def missing_records(phases: dict[str, PhaseCounts], records_seen: dict[str, int]) -> dict[str, int]:
    """Per phase, returned credits whose record never arrived (lost with their pod)."""
    out = {p: c.get("returned", 0) - records_seen.get(p, 0) for p, c in phases.items()}
    return {p: n for p, n in out.items() if n > 0}


def accounting_line(phases: dict[str, PhaseCounts]) -> str:
    """One line per phase: `profiling: issued 100 = ok 97 + failed 3 + cancelled 0 (lost 0)`."""
    return "; ".join(
        f"{phase}: issued {c.get('issued', 0)} = ok {c.get('ok', 0)} + failed "
        f"{c.get('failed', 0) + c.get('lost', 0)} + cancelled {c.get('cancelled', 0)}"
        + (f" (of the failed, {c['lost']} lost with their worker)" if c.get("lost") else "")
        for phase, c in phases.items())
