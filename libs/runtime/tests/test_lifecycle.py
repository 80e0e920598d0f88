from __future__ import annotations

import pytest

from aiperf.messages import ServiceState as S
from aiperf.runtime import IllegalTransition, Lifecycle


def test_normal_path() -> None:
    lc = Lifecycle()
    for state in (S.RUNNING, S.STOPPING, S.STOPPED):
        lc.move(state)
    assert lc.final


@pytest.mark.parametrize(("path", "bad"), [([], S.STOPPED), ([S.RUNNING], S.STARTING),
                                           ([S.FAILED], S.RUNNING), ([S.RUNNING, S.STOPPING, S.STOPPED], S.FAILED)])
def test_illegal_transitions_raise(path: list[S], bad: S) -> None:
    lc = Lifecycle()
    for state in path:
        lc.move(state)
    with pytest.raises(IllegalTransition):
        lc.move(bad)


def test_failure_keeps_its_error() -> None:
    lc = Lifecycle()
    lc.move(S.FAILED, error="boom")
    assert (lc.state, lc.error, lc.final) == (S.FAILED, "boom", True)
