"""Shared test data for the fake API server's tests: a `Widget` CRD (status subresource, a
defaulted enum, a CEL rule, an immutable field) and helpers to build and inspect objects."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

W = ("example.com", "v1", "bench", "widgets")  # group, version, namespace, plural for CustomObjectsApi
WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
             "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "required": ["size"], "properties": {
                                   "size": {"type": "integer", "minimum": 1},
                                   "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
                                   "color": {"type": "string", "x-kubernetes-validations": [
                                       {"rule": "self == oldSelf", "message": "color is immutable"}]}},
                                   "x-kubernetes-validations": [
                                       {"rule": "self.size <= 10 || self.mode == 'slow'",
                                        "message": "big widgets must be slow"}]},
                               # status declares what handlers write, not kopf's own fields: a real
                               # server prunes those (kopf keeps its state in annotations)
                               "status": {"type": "object", "properties": {
                                   "phase": {"type": "string"}, "observedSize": {"type": "integer"}}}}}}}]},
}


def widget(name: str, size: Any = 1, **spec: Any) -> dict[str, Any]:
    """A Widget body (no namespace: the URL names it)."""
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": {"size": size, **spec}}


def status_of(exc: pytest.ExceptionInfo[ApiException]) -> dict[str, Any]:
    """The `Status` body of a refused request."""
    body: dict[str, Any] = json.loads(exc.value.body)
    return body
