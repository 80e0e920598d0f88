"""The run's CURVE key Secret: in the manifests without data (deterministic, no key material),
filled with a fresh pair at `kube profile` time, mounted read-only in every container but the results sidecar, and the
run config pointing at the mount (issue 10, item 12)."""

from __future__ import annotations

import base64
from pathlib import Path

from aiperf.comms import CurveKeys
from aiperf.kube import build_all, cluster_run_config, to_yaml, with_curve_keys
from aiperf.kube.config_map import CURVE_DIR


def _pods(objects: list[dict]) -> list[dict]:
    (jobset,) = (o for o in objects if o["kind"] == "JobSet")
    return [rj["template"]["spec"]["template"]["spec"] for rj in jobset["spec"]["replicatedJobs"]]


def test_manifests_carry_the_secret_without_data_and_mount_it_everywhere(typical) -> None:
    settings, run_config = typical
    objects = build_all(settings, run_config)
    (secret,) = (o for o in objects if o["kind"] == "Secret")
    assert secret["metadata"]["name"] == "aiperf-llama-c64-curve"
    assert "data" not in secret and "stringData" not in secret
    assert cluster_run_config(settings, run_config)["comms"]["curve_keys_dir"] == CURVE_DIR
    for pod in _pods(objects):
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["curve"]["secret"]["secretName"] == "aiperf-llama-c64-curve"
        for container in pod["containers"]:
            mounts = {m["name"]: m for m in container["volumeMounts"]}
            if container["name"] == "results-sidecar":  # serves files over HTTP, no ZMQ: no keys
                assert set(mounts) == {"artifacts"}
                continue
            assert mounts["curve"] == {"name": "curve", "mountPath": CURVE_DIR, "readOnly": True}


def test_kube_profile_fills_the_secret_and_nothing_else(typical, tmp_path: Path) -> None:
    settings, run_config = typical
    objects = build_all(settings, run_config)
    keys = CurveKeys.generate()
    filled = with_curve_keys(objects, keys)
    (secret,) = (o for o in filled if o["kind"] == "Secret")
    for name, text in secret["data"].items():
        (tmp_path / name).write_bytes(base64.b64decode(text))
    assert CurveKeys.load(tmp_path) == keys
    assert [o for o in filled if o["kind"] != "Secret"] == [o for o in objects if o["kind"] != "Secret"]
    assert "data" not in next(o for o in objects if o["kind"] == "Secret")  # the input is untouched
    rest = to_yaml([o for o in filled if o["kind"] != "Secret"])
    for key in (keys.server_secret, keys.client_secret, keys.server_public, keys.client_public):
        assert key.decode() not in rest
