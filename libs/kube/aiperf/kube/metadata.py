"""Object metadata shared by every object of a run: names, namespace, labels, annotations."""

from __future__ import annotations

from typing import Any

from aiperf.kube.settings import COMPONENT_LABEL, INSTANCE_LABEL, NAME_LABEL, KubeSettings


def labels(settings: KubeSettings, component: str | None = None) -> dict[str, str]:
    """`app.kubernetes.io/name: aiperf`, `app.kubernetes.io/instance: <name>`, the component when
    given, then the user's labels (which may not override ours: settings reject that)."""
    out = {NAME_LABEL: "aiperf", INSTANCE_LABEL: settings.name}
    if component is not None:
        out[COMPONENT_LABEL] = component
    return {**out, **settings.labels}


def object_meta(settings: KubeSettings, name: str, component: str | None = None) -> dict[str, Any]:
    """`metadata` of a namespaced object `name` of this run."""
    meta: dict[str, Any] = {"name": name, "namespace": settings.namespace,
                            "labels": labels(settings, component)}
    if settings.annotations:
        meta["annotations"] = dict(settings.annotations)
    return meta
