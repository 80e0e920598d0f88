"""Every wire message survives a msgpack round trip through its channel's union."""

from __future__ import annotations

import types
import typing

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiperf import messages as m

CHANNELS = {
    "control.to_controller": m.ToController,
    "control.to_service": m.ToService,
    "event_bus": m.Event,
    "credits": m.CreditChannel,
    "credits.upstream": m.CreditUpstream,
    "credit_returns": m.CreditReturnChannel,
    "raw_records": m.RawRecordChannel,
    "records": m.RecordChannel,
    "pods.upstream": m.PodUpstream,
    "pods": m.PodDownstream,
}


def _members(union: object) -> list[type]:
    args = typing.get_args(union)
    return list(args) if args else [union]  # type: ignore[list-item]


ALL = [(name, cls) for name, union in CHANNELS.items() for cls in _members(union)]


INT64 = st.integers(-(2**63), 2**63 - 1)  # msgpack's signed range


def _json_safe_dicts() -> st.SearchStrategy[object]:
    return st.recursive(st.none() | st.booleans() | INT64 | st.text(),
                        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(), c, max_size=3),
                        max_leaves=6)


def _strategy(cls: type) -> st.SearchStrategy[object]:
    hints = typing.get_type_hints(cls)
    overrides: dict[str, st.SearchStrategy[object]] = {}
    for field in msgspec.structs.fields(cls):
        hint = hints[field.name]
        if hint is int:
            overrides[field.name] = INT64
        elif hint == (int | None):
            overrides[field.name] = st.none() | INT64
        elif hint == list[int]:
            overrides[field.name] = st.lists(INT64, max_size=5)
        elif hint == dict[str, typing.Any]:
            overrides[field.name] = st.dictionaries(st.text(), _json_safe_dicts(), max_size=3)
        elif hint == float:
            overrides[field.name] = st.floats(allow_nan=False)
        elif hint == dict[str, float | list[float]]:
            fl = st.floats(allow_nan=False)
            overrides[field.name] = st.dictionaries(st.text(), fl | st.lists(fl, max_size=3))
        elif hint == dict[str, str | int | float | bool | None]:
            overrides[field.name] = st.dictionaries(
                st.text(), st.none() | st.booleans() | INT64 | st.floats(allow_nan=False) | st.text())
        elif hint == dict[str, dict[str, float]]:
            overrides[field.name] = st.dictionaries(
                st.text(), st.dictionaries(st.text(), st.floats(allow_nan=False)), max_size=3)
        elif hint == (float | None):
            overrides[field.name] = st.none() | st.floats(allow_nan=False)
        elif isinstance(hint, type) and issubclass(hint, msgspec.Struct):
            overrides[field.name] = _strategy(hint)
        elif (typing.get_origin(hint) in (types.UnionType, typing.Union) and type(None) in typing.get_args(hint)
              and all(a is type(None) or (isinstance(a, type) and issubclass(a, msgspec.Struct))
                      for a in typing.get_args(hint))):
            inner = [a for a in typing.get_args(hint) if a is not type(None)]
            overrides[field.name] = st.none() | st.one_of(*(_strategy(a) for a in inner))
        elif typing.get_origin(hint) is dict and issubclass(typing.get_args(hint)[1], msgspec.Struct):
            key, value = typing.get_args(hint)
            overrides[field.name] = st.dictionaries(st.from_type(key), _strategy(value), max_size=3)
        elif hint == list[str]:
            overrides[field.name] = st.lists(st.text(), max_size=3)
        elif typing.get_origin(hint) is list and issubclass(typing.get_args(hint)[0], msgspec.Struct):
            overrides[field.name] = st.lists(_strategy(typing.get_args(hint)[0]), max_size=3)
    return st.builds(cls, **overrides)


@pytest.mark.parametrize(("channel", "cls"), ALL, ids=[f"{c}:{k.__name__}" for c, k in ALL])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_round_trip_through_channel_union(channel: str, cls: type, data: st.DataObject) -> None:
    message = data.draw(_strategy(cls))
    encoded = msgspec.msgpack.encode(message)
    decoded = msgspec.msgpack.decode(encoded, type=CHANNELS[channel])
    assert decoded == message
    assert type(decoded) is cls


@pytest.mark.parametrize(("channel", "cls"), ALL, ids=[f"{c}:{k.__name__}" for c, k in ALL])
def test_messages_are_frozen_and_tagged(channel: str, cls: type) -> None:
    config = cls.__struct_config__  # type: ignore[attr-defined]
    assert config.frozen
    assert config.tag_field == "kind"
    assert config.tag == cls.__name__.lower()
    assert not config.forbid_unknown_fields


def test_older_reader_skips_newer_fields() -> None:
    class RegisterV2(m.Message, frozen=True, kw_only=True, tag="register"):
        service_id: str
        service_type: m.ServiceType
        pid: int
        host: str = ""
        group_id: str = ""
        zone: str = "eu"

    new = RegisterV2(service_id="w1", service_type=m.ServiceType.WORKER, pid=7, zone="us")
    old = msgspec.msgpack.decode(msgspec.msgpack.encode(new), type=m.ToController)
    assert old == m.Register(service_id="w1", service_type=m.ServiceType.WORKER, pid=7)


def test_wrong_field_type_is_rejected() -> None:
    bad = msgspec.msgpack.encode({"kind": "credit", "phase": "profiling", "num": "seven",
                                  "conversation_id": "c", "issued_at_ns": 1})
    with pytest.raises(msgspec.ValidationError):
        msgspec.msgpack.decode(bad, type=m.CreditChannel)


def test_event_topics_are_tags() -> None:
    event = m.Progress(phase=m.Phase.PROFILING, completed=3, errors=0)
    assert m.topic_of(event) == b"progress"
