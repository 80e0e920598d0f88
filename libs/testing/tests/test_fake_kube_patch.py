"""JSON Patch (RFC 6902) and merge patch (RFC 7386) as the fake API server applies them."""

from __future__ import annotations

from typing import Any

import pytest

from aiperf.testing.fake_kube_patch import BadPatch, PatchError, json_equal, json_patch, merge_patch

DOC: dict[str, Any] = {"a": {"b": [1, 2, 3], "c~d": "x", "e/f": True}, "n": 1}


@pytest.mark.parametrize(("ops", "expected"), [
    ([{"op": "add", "path": "/a/b/1", "value": 9}], {**DOC, "a": {**DOC["a"], "b": [1, 9, 2, 3]}}),
    ([{"op": "add", "path": "/a/b/-", "value": 4}], {**DOC, "a": {**DOC["a"], "b": [1, 2, 3, 4]}}),
    ([{"op": "remove", "path": "/a/c~0d"}], {**DOC, "a": {"b": [1, 2, 3], "e/f": True}}),
    ([{"op": "replace", "path": "/a/e~1f", "value": False}], {**DOC, "a": {**DOC["a"], "e/f": False}}),
    ([{"op": "move", "from": "/n", "path": "/m"}], {"a": DOC["a"], "m": 1}),
    ([{"op": "copy", "from": "/a/b/0", "path": "/z"}], {**DOC, "z": 1}),
    ([{"op": "test", "path": "/n", "value": 1.0}], DOC),
    ([{"op": "replace", "path": "", "value": [1]}], [1]),
])
def test_json_patch_ops(ops: list[dict[str, Any]], expected: Any) -> None:
    assert json_patch(DOC, ops) == expected


@pytest.mark.parametrize("ops", [
    [{"op": "test", "path": "/a/e~1f", "value": 1}],  # true is not 1
    [{"op": "test", "path": "/missing", "value": 1}],
    [{"op": "remove", "path": "/missing"}],
    [{"op": "replace", "path": "/a/b/3", "value": 0}],
    [{"op": "add", "path": "/x/y", "value": 0}],
    [{"op": "move", "from": "/a", "path": "/a/b/x"}],
    [{"op": "frobnicate", "path": "/n"}],
    [{"op": "add", "path": "/a/b/01", "value": 0}],
])
def test_json_patch_failures_leave_the_document_alone(ops: list[dict[str, Any]]) -> None:
    before = repr(DOC)
    with pytest.raises(PatchError):
        json_patch(DOC, [{"op": "add", "path": "/first", "value": 1}, *ops])
    assert repr(DOC) == before


def test_failed_test_op_message_matches_the_real_server() -> None:
    with pytest.raises(PatchError, match=r"^testing value /n failed: test failed$"):
        json_patch(DOC, [{"op": "test", "path": "/n", "value": 2}])


def test_a_non_list_json_patch_is_malformed() -> None:
    with pytest.raises(BadPatch):
        json_patch(DOC, {"op": "add"})


def test_merge_patch_merges_objects_removes_nulls_and_replaces_lists() -> None:
    assert merge_patch(DOC, {"a": {"b": [7], "c~d": None}, "new": {"x": None, "y": 1}}) == {
        "a": {"b": [7], "e/f": True}, "n": 1, "new": {"y": 1}}
    assert merge_patch(DOC, [1]) == [1]
    assert merge_patch("scalar", {"k": 1}) == {"k": 1}


def test_json_equal_is_json_not_python_equality() -> None:
    assert json_equal({"a": [1, 2.0]}, {"a": [1.0, 2]})
    assert not json_equal(True, 1) and not json_equal(0, False) and not json_equal("1", 1)


def test_a_null_test_of_a_missing_path_passes_like_the_real_server() -> None:
    assert json_patch(DOC, [{"op": "test", "path": "/missing", "value": None}]) == DOC
    assert json_patch(DOC, [{"op": "test", "path": "/a/missing", "value": None}]) == DOC
    with pytest.raises(PatchError):  # a missing parent is still a failure
        json_patch(DOC, [{"op": "test", "path": "/x/y", "value": None}])
    with pytest.raises(PatchError):
        json_patch(DOC, [{"op": "test", "path": "/n", "value": None}])
