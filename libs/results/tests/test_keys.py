"""Run keys: what `EPOCH_RE` accepts, the uid-derived suffix, and the order of keys."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiperf.results.keys import is_key, order, run_key, uid_suffix, wall_seconds


@pytest.mark.parametrize("text", ["123456789", "1700000000", "1700000000123456", "123456789000000"])
def test_valid_keys(text: str) -> None:
    assert is_key(text)


@pytest.mark.parametrize("text", ["", "latest", "12345678", "17000000001", "17000000001234", "1700000000-abcdef01",
                                  "-21620277", "1700000000\n", " 1700000000", "１７００００００００", "1700000000.zip",
                                  "17000000001234567"])
def test_invalid_keys(text: str) -> None:
    assert not is_key(text)


def test_a_same_second_recreation_gets_a_distinct_storable_key() -> None:
    first = run_key("2023-11-14T22:13:20Z", "aaaaaaaa-1111")
    second = run_key("2023-11-14T22:13:20Z", "bbbbbbbb-2222")
    assert first != second and is_key(first) and is_key(second)
    assert first.startswith("1700000000") and len(first) == 16
    assert run_key("2023-11-14T22:13:20Z", "aaaaaaaa-1111") == first  # deterministic
    assert first[10:] == uid_suffix("aaaaaaaa-1111")


def test_microseconds_win_over_the_uid_and_no_uid_gives_bare_seconds() -> None:
    assert run_key("2023-11-14T22:13:20.000042Z", "u") == "1700000000000042"
    assert run_key("2023-11-14T22:13:20Z", None) == "1700000000"


def test_a_pre_1973_creation_time_is_not_storable() -> None:
    with pytest.raises(ValueError, match="not storable"):
        run_key("1969-04-25T18:22:03Z", "u")


@given(st.integers(100_000_000, 9_999_999_999), st.text(min_size=1, max_size=40))
def test_every_key_is_valid_and_keeps_its_wall_seconds(seconds: int, uid: str) -> None:
    from datetime import UTC, datetime

    key = run_key(datetime.fromtimestamp(seconds, UTC), uid)
    assert is_key(key) and wall_seconds(key) == seconds


def test_order_compares_wall_seconds_first() -> None:
    keys = ["1700000001", "1700000000999999", "1700000002000000", "999999999"]
    assert sorted(keys, key=order) == ["999999999", "1700000000999999", "1700000001", "1700000002000000"]
