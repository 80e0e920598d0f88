"""The vocabulary of the fake Kubernetes API server: objects, resource types, errors.

`ApiError` renders as the `Status` body a real kube-apiserver sends; `FieldError` is one entry
of a 422 `Invalid` answer, worded like the apiserver's `field.Error`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from aiperf.kubeapi import Obj

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

STALE = "the object has been modified; please apply your changes to the latest version and try again"


@dataclass(frozen=True)
class KindInfo:
    """One served resource type (one group/version/plural) and how the server treats it.

    `has_status`: writes to the main resource ignore `status`, and `.../status` exists.
    `builtin`: a compiled-in type (strategic merge patch allowed, PUT without a resourceVersion
    allowed, an immediate DELETE answers with a `Status` unless `returns_deleted`); custom
    resources (served from a CRD, `crd` names it) are the opposite.
    `schema`: the CRD version's `openAPIV3Schema` (custom resources only).
    `store_group`/`store_plural`: where objects live when another type shares the storage
    (events.k8s.io/v1 Events are core/v1 Events); None/empty means `group`/`plural` (the core
    group is "", so `store_group=""` names it).
    `subresources`: subresources besides `status` and `scale` (pods: log, proxy, ...).
    `is_storage`: this version is the one objects are stored at (one per CRD).
    """

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    has_status: bool = False
    builtin: bool = True
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    has_scale: bool = False
    scale_paths: tuple[str, str, str] = (".spec.replicas", ".status.replicas", "")
    crd: str = ""
    schema: Obj | None = field(default=None, compare=False, hash=False)
    store_group: str | None = None
    store_plural: str = ""
    subresources: tuple[str, ...] = ()
    returns_deleted: bool = False
    is_storage: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource(self) -> str:
        """The name used in error messages: `pods`, `jobsets.jobset.x-k8s.io`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        """`Kind.group` as in an `Invalid` message (`Pod`, `Job.batch`)."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def storage(self) -> tuple[str, str]:
        """(group, plural) under which the store keeps these objects."""
        group = self.group if self.store_group is None else self.store_group
        return (group, self.store_plural or self.plural)


_NO_VALUE = object()

_TYPE_TEXT = {"Required": "Required value", "Invalid": "Invalid value", "NotSupported": "Unsupported value",
              "Forbidden": "Forbidden", "TooLong": "Too long", "TooMany": "Too many",
              "Duplicate": "Duplicate value", "TypeInvalid": "Invalid value", "NotFound": "Not found",
              "InternalError": "Internal error"}


@dataclass(frozen=True)
class FieldError:
    """One invalid field, rendered like the apiserver's `field.Error`:
    `spec.x: Invalid value: "a": must be an integer`, `metadata.name: Required value`."""

    type: str  # a key of _TYPE_TEXT
    field: str
    detail: str = ""
    value: Any = _NO_VALUE

    def body(self) -> str:
        """The message without the field path (a `cause`'s message)."""
        text = _TYPE_TEXT[self.type]
        if self.type not in ("Required", "Forbidden", "TooLong", "NotFound", "InternalError") and self.value is not _NO_VALUE:
            text += ": " + go_value(self.value)
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"

    def cause(self) -> dict[str, str]:
        return {"reason": f"FieldValue{self.type}", "message": self.body(), "field": self.field}


def go_value(value: Any) -> str:
    """A bad value as the apiserver prints it: strings quoted, numbers bare, JSON otherwise."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if value is None:
        return "null"
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


class ApiError(Exception):
    """An error answer: rendered as a `Status` object with HTTP status `code`."""

    def __init__(self, code: int, reason: str, message: str, *, info: KindInfo | None = None,
                 name: str = "", causes: list[dict[str, str]] | None = None,
                 details: dict[str, Any] | None = None, metadata: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.details: dict[str, Any] = dict(details or {})
        if name:
            self.details["name"] = name
        if info is not None:
            if info.group:
                self.details["group"] = info.group
            self.details["kind"] = info.plural
        if causes:
            self.details["causes"] = causes

    def status(self) -> Obj:
        """The `Status` body the real server sends."""
        body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": dict(self.metadata), "status": "Failure",
                     "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            body["details"] = self.details
        return body

    @classmethod
    def not_found(cls, info: KindInfo, name: str) -> ApiError:
        return cls(404, "NotFound", f'{info.resource} "{name}" not found', info=info, name=name)

    @classmethod
    def conflict(cls, info: KindInfo, name: str, why: str) -> ApiError:
        return cls(409, "Conflict", f'Operation cannot be fulfilled on {info.resource} "{name}": {why}',
                   info=info, name=name)

    @classmethod
    def bad_request(cls, message: str) -> ApiError:
        return cls(400, "BadRequest", message)

    @classmethod
    def invalid(cls, info: KindInfo, name: str, message: str) -> ApiError:
        """422 with one free-text problem (no field list)."""
        return cls(422, "Invalid", f'{info.qualified_kind} "{name}" is invalid: {message}', info=info, name=name)

    @classmethod
    def invalid_fields(cls, info: KindInfo, name: str, errors: list[FieldError]) -> ApiError:
        """422 `Invalid` listing `errors` (in brackets when more than one) and one cause each."""
        text = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(str(e) for e in errors) + "]"
        return cls(422, "Invalid", f'{info.qualified_kind} "{name}" is invalid: {text}', info=info, name=name,
                   causes=[e.cause() for e in errors])

    @classmethod
    def forbidden(cls, info: KindInfo, name: str, why: str) -> ApiError:
        target = f'{info.resource} "{name}"' if name else info.resource
        return cls(403, "Forbidden", f"{target} is forbidden: {why}", info=info, name=name)

    @classmethod
    def no_route(cls) -> ApiError:
        return cls(404, "NotFound", "the server could not find the requested resource")

    @classmethod
    def method_not_allowed(cls) -> ApiError:
        return cls(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")


@dataclass
class WriteOptions:
    """Per-request write options (`dryRun=All`, `fieldValidation`) and the warnings the write
    produced (sent back as `Warning: 299 - "..."` headers)."""

    dry_run: bool = False
    field_validation: str = "Warn"  # Ignore | Warn | Strict
    warnings: list[str] = field(default_factory=list)
