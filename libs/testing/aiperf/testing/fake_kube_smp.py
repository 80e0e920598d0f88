"""Strategic merge patch (`application/strategic-merge-patch+json`) on the built-in kinds the
fake serves, for the list fields with a patch merge key in the Kubernetes API types:

- Pod spec (also a Job's pod template): `containers`, `initContainers`, `ephemeralContainers`
  (key `name`), and in each container `env` (`name`), `ports` (`containerPort`), `volumeMounts`
  (`mountPath`), `volumeDevices` (`devicePath`); `volumes`, `imagePullSecrets` (`name`),
  `hostAliases` (`ip`); Pod status `conditions` (`type`).
- Service `spec.ports` (`port`); ServiceAccount `secrets` (`name`); Job status `conditions`.
- metadata: `finalizers` (a merged set), `ownerReferences` (`uid`).

Every other list is replaced, maps merge key by key, `null` deletes a key. Directives:
`$patch: replace|delete|merge` on maps and list items, `$retainKeys`, `$deleteFromPrimitiveList/F`,
`$setElementOrder/F`. Any other `$`-key or `$patch` value is refused with 422 (the real
server's patch library refuses them too) rather than stored.
"""

from __future__ import annotations

import copy
from typing import Any

from aiperf.testing.fake_kube_api import ApiError, KindInfo, Obj

ListDesc = tuple[str, str | None, dict[str, Any]]  # ("list", merge key or None for a set, item fields)


def _keyed(key: str | None, item: dict[str, Any] | None = None) -> ListDesc:
    return ("list", key, item or {})


_CONTAINER: dict[str, Any] = {"env": _keyed("name"), "ports": _keyed("containerPort"),
                              "volumeMounts": _keyed("mountPath"), "volumeDevices": _keyed("devicePath"),
                              "resizePolicy": _keyed("resourceName")}
_POD_SPEC: dict[str, Any] = {"containers": _keyed("name", _CONTAINER), "initContainers": _keyed("name", _CONTAINER),
                             "ephemeralContainers": _keyed("name", _CONTAINER), "volumes": _keyed("name"),
                             "imagePullSecrets": _keyed("name"), "hostAliases": _keyed("ip")}
_META: dict[str, Any] = {"finalizers": _keyed(None), "ownerReferences": _keyed("uid")}
_CONDITIONS: dict[str, Any] = {"conditions": _keyed("type")}

_KINDS: dict[tuple[str, str], dict[str, Any]] = {
    ("", "pods"): {"metadata": _META, "spec": _POD_SPEC, "status": _CONDITIONS},
    ("batch", "jobs"): {"metadata": _META, "spec": {"template": {"metadata": _META, "spec": _POD_SPEC}},
                        "status": _CONDITIONS},
    ("", "services"): {"metadata": _META, "spec": {"ports": _keyed("port")}},
    ("", "serviceaccounts"): {"metadata": _META, "secrets": _keyed("name")},
}


class _Unsupported(Exception):
    pass


def strategic_merge_patch(info: KindInfo, original: Obj, patch: Any) -> Obj:
    """Apply `patch` to `original` (a new document; `original` is untouched). Raises `ApiError`
    400 for a non-object patch and 422 for a directive it does not support."""
    if not isinstance(patch, dict):
        raise ApiError.bad_request("json: cannot unmarshal array into Go value of type map[string]interface {}")
    desc = _KINDS.get((info.group, info.plural), {"metadata": _META})
    try:
        merged = _merge_map(original, patch, desc)
    except _Unsupported as exc:
        raise ApiError(422, "Invalid", f"strategic merge patch: {exc}", info=info,
                       name=original.get("metadata", {}).get("name", "")) from None
    return merged if merged is not None else {}


def _merge_map(original: Any, patch: dict[str, Any], desc: dict[str, Any]) -> dict[str, Any] | None:
    directive = patch.get("$patch")
    if directive == "replace":
        return _merge_map({}, {k: v for k, v in patch.items() if k != "$patch"}, desc)
    if directive == "delete":
        return None
    if directive not in (None, "merge"):
        raise _Unsupported(f"unknown patch type: {directive}")
    result = copy.deepcopy(original) if isinstance(original, dict) else {}
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith("$setElementOrder/"):
            orders[key.split("/", 1)[1]] = value if isinstance(value, list) else []
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [x for x in result.get(field) or [] if x not in (value or [])]
            continue
        if key.startswith("$"):
            raise _Unsupported(f"unknown directive {key}")
        sub = desc.get(key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = _merge_map(result.get(key), value, sub if isinstance(sub, dict) else {})
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and isinstance(sub, tuple):
            result[key] = _merge_list(result.get(key) or [], value, sub)
        elif isinstance(value, list):
            result[key] = [_merge_map({}, v, {}) if isinstance(v, dict) else v for v in value]
        else:
            result[key] = value
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    for field, order in orders.items():
        sub = desc.get(field)
        if isinstance(result.get(field), list) and isinstance(sub, tuple):
            result[field] = _ordered(result[field], order, sub[1])
    return result


def _merge_list(original: list[Any], patch: list[Any], desc: ListDesc) -> list[Any]:
    _, key, item_desc = desc
    if any(isinstance(p, dict) and p.get("$patch") == "replace" and len(p) == 1 for p in patch):
        return [_merge_map({}, p, item_desc) if isinstance(p, dict) else p for p in patch
                if not (isinstance(p, dict) and p.get("$patch") == "replace" and len(p) == 1)]
    if key is None:  # a set of primitives
        return [*original, *[p for p in patch if p not in original]]
    result = copy.deepcopy(original)
    for item in patch:
        if not isinstance(item, dict):
            raise _Unsupported(f"a list with merge key {key} needs objects, got {item!r}")
        directive = item.get("$patch")
        index = next((i for i, o in enumerate(result) if isinstance(o, dict) and o.get(key) == item.get(key)),
                     None)
        if directive == "delete":
            if index is not None:
                del result[index]
            continue
        if directive not in (None, "merge", "replace"):
            raise _Unsupported(f"unknown patch type: {directive}")
        if index is None:
            merged = _merge_map({}, {k: v for k, v in item.items() if k != "$patch"}, item_desc)
            result.append(merged)
        else:
            merged = _merge_map({} if directive == "replace" else result[index],
                                {k: v for k, v in item.items() if k != "$patch"}, item_desc)
            result[index] = merged
    return result


def _ordered(items: list[Any], order: list[Any], key: str | None) -> list[Any]:
    def ident(item: Any) -> Any:
        return item.get(key) if key is not None and isinstance(item, dict) else item

    wanted = [o.get(key) if key is not None and isinstance(o, dict) else o for o in order]
    positioned = sorted((i for i in items if ident(i) in wanted), key=lambda i: wanted.index(ident(i)))
    return positioned + [i for i in items if ident(i) not in wanted]
