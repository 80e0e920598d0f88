"""JSON Patch (RFC 6902) and JSON Merge Patch (RFC 7386) for the fake Kubernetes API server.

Both functions are pure: they return a new document and never modify their arguments, so a
patch that fails half way leaves nothing behind (the server applies a patch atomically).
Error texts follow the ones the real API server passes through from its patch library.
"""

from __future__ import annotations

import copy
from typing import Any


class PatchError(Exception):
    """The patch cannot be applied to this document (a failed `test`, a missing path, ...)."""


class BadPatch(Exception):
    """The patch document itself is malformed (not a list of operations, an op without `path`)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 merge patch: objects merge key by key, `null` removes a key,
    anything else (lists included) replaces the target value."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(document: Any, operations: Any) -> Any:
    """Apply an RFC 6902 JSON Patch (ops add, remove, replace, move, copy, test) in order.

    Raises `BadPatch` when `operations` is not a list of operation objects, and `PatchError`
    when an operation does not apply (missing path, failed `test`); `document` is unchanged.
    """
    if not isinstance(operations, list):
        raise BadPatch(f"json: cannot unmarshal {_json_type(operations)} into Go value of type "
                       "jsonpatch.Patch")
    doc = copy.deepcopy(document)
    for op in operations:
        if not isinstance(op, dict):
            raise BadPatch("json: cannot unmarshal non-object into Go value of type jsonpatch.Operation")
        doc = _apply_one(doc, op)
    return doc


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: unlike Python's `==`, `true` is not `1` and `1.0` equals `1`."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _apply_one(doc: Any, op: dict[str, Any]) -> Any:
    kind = op.get("op")
    path = op.get("path")
    if not isinstance(path, str):
        raise PatchError(f"{kind} operation does not apply: path is missing")
    match kind:
        case "add":
            return _add(doc, path, _value(op), kind)
        case "remove":
            doc, _ = _remove(doc, path, kind)
            return doc
        case "replace":
            doc, _ = _remove(doc, path, kind)
            return _add(doc, path, _value(op), kind)
        case "move" | "copy":
            source = op.get("from")
            if not isinstance(source, str):
                raise PatchError(f"{kind} operation does not apply: from is missing")
            if kind == "move":
                if path.startswith(source + "/"):
                    raise PatchError(f"move operation does not apply: cannot move {source} into its "
                                     f"child {path}")
                doc, value = _remove(doc, source, kind)
            else:
                value = copy.deepcopy(_get(doc, source, kind))
            return _add(doc, path, value, kind)
        case "test":
            try:
                current = _get(doc, path, kind)
            except PatchError:
                current = _MISSING
            expected = _value(op)
            if current is _MISSING and expected is None and _tokens(path):
                try:  # only the last key may be missing
                    _parent(doc, _tokens(path)[:-1], path, kind)
                except PatchError:
                    raise PatchError(f"testing value {path} failed: test failed") from None
            if current is _MISSING and expected is None:
                return doc  # the apiserver's patch library: `null` tests a missing path as equal
            if current is _MISSING or not json_equal(current, expected):
                raise PatchError(f"testing value {path} failed: test failed")
            return doc
        case _:
            raise PatchError(f"Unexpected kind: {kind}")


_MISSING = object()


def _value(op: dict[str, Any]) -> Any:
    if "value" not in op:
        raise PatchError(f"{op.get('op')} operation does not apply: value is missing")
    return copy.deepcopy(op["value"])


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer must be empty or start with a \"/\": {path}")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _index(container: list[Any], token: str, path: str, kind: str, *, allow_end: bool) -> int:
    if allow_end and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"{kind} operation does not apply: invalid array index {token!r} in {path}")
    index = int(token)
    limit = len(container) if allow_end else len(container) - 1
    if index > limit:
        raise PatchError(f"{kind} operation does not apply: index out of range: {path}")
    return index


def _parent(doc: Any, tokens: list[str], path: str, kind: str) -> Any:
    node = doc
    for token in tokens:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, path, kind, allow_end=False)]
        else:
            raise PatchError(f"{kind} operation does not apply: doc is missing path: {path}: "
                             "missing value")
    return node


def _get(doc: Any, path: str, kind: str) -> Any:
    tokens = _tokens(path)
    if not tokens:
        return doc
    parent = _parent(doc, tokens[:-1], path, kind)
    last = tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, path, kind, allow_end=False)]
    raise PatchError(f"{kind} operation does not apply: doc is missing key: {path}: missing value")


def _add(doc: Any, path: str, value: Any, kind: str) -> Any:
    tokens = _tokens(path)
    if not tokens:
        return value
    parent = _parent(doc, tokens[:-1], path, kind)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, kind, allow_end=True), value)
    else:
        raise PatchError(f"{kind} operation does not apply: doc is missing path: {path}: missing value")
    return doc


def _remove(doc: Any, path: str, kind: str) -> tuple[Any, Any]:
    tokens = _tokens(path)
    if not tokens:
        return None, doc
    parent = _parent(doc, tokens[:-1], path, kind)
    last = tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, path, kind, allow_end=False))
    raise PatchError(f"{kind} operation does not apply: doc is missing key: {path}: missing value")


def _json_type(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "null" if value is None else type(value).__name__
