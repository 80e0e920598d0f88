"""Label and field selectors of lists and watches, and the watchers a store feeds.

A watcher sees an object through its selector the way a real watch cache does: an update that
makes an object match is ADDED, one that makes it stop matching is DELETED (with the new state),
and BOOKMARKs carry only a resourceVersion (when the watch allowed them).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from aiperf.testing.fake_kube_api import ApiError, Obj

Requirement = Callable[[dict[str, str]], bool]
_SET_TERM = re.compile(r"^\s*([^\s!=(),]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ_TERM = re.compile(r"^\s*([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)\s*$")
_EXISTS_TERM = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*$")


def _label_requirement(key: str, op: str, values: frozenset[str] = frozenset()) -> Requirement:
    """Label `key` is in/not in `values` (`in`, `notin`; `=`/`!=` use one value), or it exists /
    does not (`exists`, `!exists`)."""

    def check(labels: dict[str, str]) -> bool:
        match op:
            case "in":
                return labels.get(key) in values
            case "notin":
                return labels.get(key) not in values
            case "exists":
                return key in labels
            case _:
                return key not in labels

    return check


def _field_requirement(attr: str, value: str, negate: bool) -> Callable[[Obj], bool]:
    def check(obj: Obj) -> bool:
        return (obj["metadata"].get(attr, "") == value) != negate

    return check


def parse_label_selector(selector: str) -> list[Requirement]:
    """Parse `a=b,c!=d,e in (x,y),f notin (z),g,!h`; raises `ApiError` 400 on bad syntax."""
    terms: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            terms.append(selector[start:i])
            start = i + 1
    terms.append(selector[start:])
    requirements: list[Requirement] = []
    for term in (t for t in terms if t.strip()):
        if m := _SET_TERM.match(term):
            values = frozenset(v.strip() for v in m.group(3).split(","))
            requirements.append(_label_requirement(m.group(1), m.group(2), values))
        elif m := _EQ_TERM.match(term):
            key, op, value = m.groups()
            requirements.append(_label_requirement(key, "notin" if op == "!=" else "in", frozenset({value})))
        elif m := _EXISTS_TERM.match(term):
            requirements.append(_label_requirement(m.group(2), "!exists" if m.group(1) == "!" else "exists"))
        else:
            raise ApiError.bad_request(f"unable to parse requirement: {term.strip()!r}")
    return requirements


def parse_field_selector(selector: str) -> list[Callable[[Obj], bool]]:
    """Parse `metadata.name=x,metadata.namespace!=y` (the fields every kind supports)."""
    requirements: list[Callable[[Obj], bool]] = []
    for term in (t.strip() for t in selector.split(",") if t.strip()):
        m = _EQ_TERM.match(term)
        if m is None:
            raise ApiError.bad_request(f"invalid field selector: {term!r}")
        key, op, value = m.groups()
        if key not in ("metadata.name", "metadata.namespace"):
            raise ApiError.bad_request(f'field label not supported: {key}')
        requirements.append(_field_requirement(key.split(".", 1)[1], value, op == "!="))
    return requirements


@dataclass
class Selector:
    """Label and field selectors of one list or watch."""

    labels: list[Requirement] = field(default_factory=list)
    fields: list[Callable[[Obj], bool]] = field(default_factory=list)

    @classmethod
    def parse(cls, label_selector: str | None, field_selector: str | None) -> Selector:
        return cls(parse_label_selector(label_selector or ""), parse_field_selector(field_selector or ""))

    def matches(self, obj: Obj) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(r(labels) for r in self.labels) and all(r(obj) for r in self.fields)


# -- watch -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WatchEvent:
    """One committed change: `type` is ADDED, MODIFIED or DELETED; `obj` is the object after it,
    `old` the object before it (None for ADDED). `group`/`plural` are the storage ones."""

    rv: int
    type: str
    group: str
    plural: str
    namespace: str
    obj: Obj
    old: Obj | None = None


BOOKMARK = "BOOKMARK"


@dataclass(eq=False)
class Watcher:
    """A live watch: (type, object) pairs it should send land in `queue` (`type` BOOKMARK carries
    the resourceVersion only); `None` there means the server stops."""

    group: str
    plural: str
    namespace: str | None
    selector: Selector
    bookmarks: bool = False
    queue: asyncio.Queue[tuple[str, Obj] | None] = field(default_factory=asyncio.Queue)

    def translate(self, event: WatchEvent) -> tuple[str, Obj] | None:
        """What this watch sends for `event`, or None: selector transitions become ADDED or
        DELETED as on a real server."""
        if (event.group, event.plural) != (self.group, self.plural):
            return None
        if self.namespace is not None and event.namespace != self.namespace:
            return None
        now = self.selector.matches(event.obj)
        before = event.old is not None and self.selector.matches(event.old)
        match event.type:
            case "ADDED":
                return ("ADDED", event.obj) if now else None
            case "DELETED":
                return ("DELETED", event.obj) if now else None
            case _:
                if now and before:
                    return ("MODIFIED", event.obj)
                if now:
                    return ("ADDED", event.obj)
                return ("DELETED", event.obj) if before else None

    def offer(self, event: WatchEvent) -> None:
        """Queue what this watch sends for `event`, if anything."""
        sent = self.translate(event)
        if sent is not None:
            self.queue.put_nowait(sent)
