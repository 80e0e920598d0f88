"""The Secret `aiperf-<name>-curve`: the run's CURVE key files, mounted read-only at `CURVE_DIR`
in every container; `run_config.json` points `comms.curve_keys_dir` there.

The manifests (`kube generate`, the goldens) carry the Secret without data, so they stay
deterministic and free of key material; `kube profile` fills it with a fresh pair
(`with_curve_keys`) just before creating the run's objects. A Secret applied without data
leaves every service failing at start with "curve key file /curve/server.key not found":
channels are never opened unauthenticated in Kubernetes.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Sequence
from typing import Any

from aiperf.comms import CurveKeys
from aiperf.kube.containers import CURVE_VOLUME
from aiperf.kube.metadata import object_meta
from aiperf.kube.names import curve_secret_name
from aiperf.kube.settings import KubeSettings

CURVE_FILE_MODE = 0o444
"""Read-only for everyone in the container: the images run as a non-root user and the pod sets
no fsGroup, so an owner-only mode would lock the services out; each container is one service."""


def build_curve_secret(settings: KubeSettings, keys: CurveKeys | None = None) -> dict[str, Any]:
    """The run's key Secret; with `keys`, its data holds `server.key` and `client.key`
    (base64, as the API stores them); without, it has no data (the manifest form)."""
    secret: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": object_meta(settings, curve_secret_name(settings.name)),
        "type": "Opaque",
    }
    if keys is not None:
        secret["data"] = build_curve_secret_data(keys)
    return secret


def with_curve_keys(objects: Sequence[dict[str, Any]], keys: CurveKeys) -> list[dict[str, Any]]:
    """`objects` with the run's key Secret filled with `keys` (the others untouched).
    Raises `ValueError` when there is no key Secret among them."""
    out, filled = [], False
    for obj in objects:
        meta = obj.get("metadata") or {}
        if obj.get("kind") == "Secret" and meta.get("name", "").endswith("-curve"):
            obj = copy.deepcopy(obj)
            obj["data"] = build_curve_secret_data(keys)
            filled = True
        out.append(obj)
    if not filled:
        raise ValueError("no CURVE key Secret among the run's objects")
    return out


def build_curve_secret_data(keys: CurveKeys) -> dict[str, str]:
    """The `data` of the key Secret for `keys`."""
    return {name: base64.b64encode(text.encode()).decode() for name, text in keys.files().items()}


def curve_volume(settings: KubeSettings) -> dict[str, Any]:
    """The pod volume of the key Secret."""
    return {"name": CURVE_VOLUME, "secret": {"secretName": curve_secret_name(settings.name),
                                             "defaultMode": CURVE_FILE_MODE}}
