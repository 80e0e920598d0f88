"""The accounting line: every credit issued is accounted for, per phase."""

from __future__ import annotations

from collections.abc import Mapping

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


def accounting_line(phases: Mapping[Phase, PhaseAccounting]) -> str:
    """One line per phase: `profiling: issued 100 = ok 97 + failed 3 + cancelled 0 (lost 0)`."""
    return "; ".join(
        f"{phase}: issued {c.issued} = ok {c.ok} + failed {c.failed + c.lost} + cancelled {c.cancelled}"
        + (f" (of the failed, {c.lost} lost with their worker)" if c.lost else "")
        for phase, c in phases.items())
