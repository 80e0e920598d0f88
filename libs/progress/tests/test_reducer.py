"""`RunProgress` folds phase and progress broadcasts the one way every reader shows them:
properties over arbitrary event sequences (hypothesis), and the rules by example."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from aiperf.messages import (
    Event,
    Phase,
    PhaseComplete,
    PhaseSendingComplete,
    PhaseStarted,
    Progress,
    SystemState,
    SystemStateChanged,
)
from aiperf.progress import RunProgress

phases = st.sampled_from([Phase.WARMUP, Phase.PROFILING])
counts = st.integers(min_value=0, max_value=10_000)
events: st.SearchStrategy[Event] = st.one_of(
    st.builds(PhaseStarted, phase=phases, started_at_ns=st.just(1), expected_credits=st.none() | counts,
              expected_duration_s=st.none() | st.floats(min_value=0.1, max_value=1e4)),
    st.builds(PhaseSendingComplete, phase=phases, issued=counts, at_ns=st.just(1)),
    st.builds(PhaseComplete, phase=phases, issued=counts, returned=counts),
    st.builds(Progress, phase=phases, completed=counts, errors=counts, expected=st.none() | counts,
              elapsed_s=st.floats(min_value=0, max_value=1e4)),
    st.builds(SystemStateChanged, state=st.sampled_from(list(SystemState))),
)


def fold(sequence: list[Event]) -> list[RunProgress]:
    """Every intermediate progress, the empty one first (event i seen at time i)."""
    states = [RunProgress()]
    for at, event in enumerate(sequence):
        states.append(states[-1].apply(event, float(at)))
    return states


@given(st.lists(events, max_size=40))
def test_counts_only_grow_and_a_phase_once_seen_stays_in_its_place(sequence: list[Event]) -> None:
    states = fold(sequence)
    for before, after in zip(states, states[1:], strict=False):
        assert [p.phase for p in after.phases][:len(before.phases)] == [p.phase for p in before.phases]
        for old in before.phases:
            new = after.phase(old.phase)
            assert new is not None and new.completed >= old.completed and new.errors >= old.errors
            assert new.started == old.started


@given(st.lists(events, max_size=40))
def test_completed_is_the_largest_count_any_broadcast_gave(sequence: list[Event]) -> None:
    final = fold(sequence)[-1]
    for phase in (Phase.WARMUP, Phase.PROFILING):
        seen = [e.completed for e in sequence if isinstance(e, Progress) and e.phase is phase]
        seen += [e.returned for e in sequence if isinstance(e, PhaseComplete) and e.phase is phase]
        mine = final.phase(phase)
        assert (mine.completed if mine else None) == (max(seen) if seen else (0 if mine else None))


@given(st.lists(events, max_size=40))
def test_progress_broadcasts_commute_and_repeats_change_nothing(sequence: list[Event]) -> None:
    progress_only = [e for e in sequence if isinstance(e, Progress)]
    one = fold(progress_only)[-1]
    other = fold(sorted(progress_only, key=lambda e: (e.completed, e.errors)))[-1]
    assert {p.phase: (p.completed, p.errors) for p in one.phases} == \
        {p.phase: (p.completed, p.errors) for p in other.phases}
    final = fold(sequence)[-1]
    for event in sequence[-1:]:
        if not isinstance(event, PhaseComplete):  # its `ended` is the time it is seen
            assert final.apply(event, 1e9) == final


@given(st.lists(events, max_size=40))
def test_the_fraction_is_between_0_and_1_and_1_once_ended(sequence: list[Event]) -> None:
    final = fold(sequence)[-1]
    for p in final.phases:
        fraction = p.fraction(now=1e6)
        assert fraction is None or 0.0 <= fraction <= 1.0
        if p.ended is not None:
            assert fraction == 1.0


def test_the_rules_by_example() -> None:
    progress = RunProgress().apply(Progress(phase=Phase.PROFILING, completed=3, errors=0), at=1.0)
    assert progress.current is not None and progress.current.started == 1.0  # before its start event
    progress = progress.apply(PhaseStarted(phase=Phase.PROFILING, started_at_ns=1, expected_credits=10), at=2.0)
    profiling = progress.phase(Phase.PROFILING)
    assert profiling is not None and (profiling.started, profiling.expected, profiling.completed) == (1.0, 10, 3)
    assert profiling.fraction(now=2.0) == 0.3
    progress = progress.apply(PhaseSendingComplete(phase=Phase.PROFILING, issued=10, at_ns=1), at=3.0)
    progress = progress.apply(PhaseComplete(phase=Phase.PROFILING, issued=10, returned=10), at=5.0)
    progress = progress.apply(Progress(phase=Phase.PROFILING, completed=9, errors=2, elapsed_s=4.0), at=6.0)
    profiling = progress.phase(Phase.PROFILING)
    assert profiling is not None
    assert (profiling.sent, profiling.completed, profiling.errors, profiling.ended) == (10, 10, 2, 5.0)
    assert profiling.elapsed(now=99.0) == 4.0 and profiling.elapsed_s == 4.0
    same = progress.apply(SystemStateChanged(state=SystemState.DONE), at=7.0)
    assert same is progress
