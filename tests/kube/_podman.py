"""Runs a Kubernetes-mode benchmark as real pods under `podman kube play` (no cluster needed).

`PodRun` plays the part of the JobSet controller and the kubelet for the objects that
`aiperf.kube.build_all` generates:

- every JobSet pod template becomes a `kind: Pod` named (and with the hostname) JobSet gives
  it, `<jobset>-<replicatedJob>-<jobIndex>-<podIndex>`, annotated with
  `jobset.sigs.k8s.io/job-index` (the containers still read it through the downward API);
- `$(VAR)` references in `args` are expanded as the kubelet does (podman 4.3 passes them
  through literally);
- `ports:` are stripped (podman binds a containerPort on the host even without hostPort);
- emptyDir / ConfigMap volume names are made unique per pod and run (podman's volumes are
  host-global); the ConfigMap is a file given to `--configmap`; a Secret volume is a
  read-only hostPath on a folder holding the Secret's decoded files (podman 4.3 crashes on
  Secret volumes in `kube play`);
- one internal network per run (`podman network create --internal`): aardvark-dns answers the
  headless-service names through network aliases, one `kube play` per pod; the mock LLM server
  runs on it as its own container with the alias `mock` (the profile's URL is http://mock:8000).

The run is over when the controller pod's `control-plane` container (the system-controller)
exits; the `results-sidecar` container keeps running, as in a cluster. `wait()` copies the
artifacts emptyDir out, reads the sidecar's `/api/status` (it must have seen the end) and shuts it
down with `POST /shutdown` (as `aiperf kube profile` does; it must exit 0), all from inside the
sidecar container. `close()` tears everything down (pods, volumes, mock, network), which it
always does, also after a failure. Names carry a random run id, so reruns and
concurrent runs never collide.

Podman is always run with the project's settings (deploy/podman/*.conf, the same as
tools/docker-shim/docker and scripts/images/env.sh).
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from aiperf.cli.benchmark_flags import build_benchmark
from aiperf.cli.profile_options import LocalFlags, ProfileFlags
from aiperf.comms import CurveKeys
from aiperf.config import CommsOptions, RunConfig, RuntimeOptions
from aiperf.kube import KubeSettings, build_all, jobset_name, with_curve_keys
from aiperf.kube.containers import (
    ARTIFACTS_VOLUME,
    CONTROL_PLANE_CONTAINER,
    JOB_INDEX_ANNOTATION,
    RESULTS_CONTAINER,
    RESULTS_PORT,
)
from aiperf.kube.curve_secret import CURVE_FILE_MODE
from aiperf.kube.names import pod_hostname

REPO = Path(__file__).resolve().parents[2]
IMAGES = ("system-controller", "event-bus-proxy", "dataset-manager", "timing-manager", "records-manager",
          "api", "worker-group-manager", "worker", "record-processor", "results-sidecar", "server-metrics-manager",
          "mock-server", "sweep-controller")
MOCK_IMAGE = "localhost/aiperf/mock-server:latest"
MOCK_ALIAS = "mock"
MOCK_PORT = 8000
NAMESPACE = "default"
STARTUP_S = 180.0
"""Registration timeout of the pod runs: on 2 cores 12 containers start at once (vfs rootfs copy
plus each one unpacking its pex), measured 35-40 s until the last service registers."""
SIDECAR_URL = f"http://127.0.0.1:{RESULTS_PORT}"
_SIDECAR_STATUS = ("import urllib.request; "
                   f"print(urllib.request.urlopen('{SIDECAR_URL}/api/status', timeout=5).read().decode())")
_SIDECAR_SHUTDOWN = ("import urllib.request; urllib.request.urlopen(urllib.request.Request("
                     f"'{SIDECAR_URL}/shutdown', method='POST'), timeout=5)")
_VAR_REF = re.compile(r"\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")

def podman_env() -> dict[str, str]:
    """The environment podman needs here (see deploy/podman/README.md)."""
    env = dict(os.environ)
    env.setdefault("CONTAINERS_CONF", str(REPO / "deploy/podman/containers.conf"))
    env.setdefault("CONTAINERS_STORAGE_CONF", str(REPO / "deploy/podman/storage.conf"))
    env["BUILDAH_ISOLATION"] = "chroot"
    env["PATH"] = env.get("PATH", "") + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    return env


def podman(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`podman ARGS` with the project settings; raises with its stderr when `check` and it fails."""
    result = subprocess.run(["podman", *args], env=podman_env(), capture_output=True, text=True,
                            timeout=timeout)
    if check and result.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)} failed ({result.returncode}): "
                           f"{result.stderr.strip()[-2000:]}")
    return result


PODMAN_E2E = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("AIPERF_PODMAN_E2E") != "1",
                       reason="plays real pods under podman: set AIPERF_PODMAN_E2E=1 after building the "
                              "images (tests/kube/run_podman_e2e.sh does both)"),
]
"""The marks of every test module of the podman tier (`pytestmark = PODMAN_E2E`)."""


def missing_images() -> list[str]:
    """The images this test needs that podman does not have (empty: ready to run)."""
    if shutil.which("podman", path=podman_env()["PATH"]) is None:
        return ["podman itself (scripts/images/setup-podman.sh)"]
    have = podman("images", "--format", "{{.Repository}}:{{.Tag}}", check=False).stdout.split()
    return [f"localhost/aiperf/{i}:latest" for i in IMAGES if f"localhost/aiperf/{i}:latest" not in have]


def expand_refs(text: str, env: dict[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion in command/args: known variables are replaced, unknown
    references stay as written, `$$(VAR)` escapes."""
    def sub(m: re.Match[str]) -> str:
        return env.get(m.group(1), m.group(0))
    parts = text.split("$$")
    return "$".join(_VAR_REF.sub(sub, p) for p in parts)


def pod_from_template(template: dict[str, Any], *, pod: str, subdomain: str, job_index: int,
                      volume_prefix: str, secret_dirs: dict[str, Path]) -> dict[str, Any]:
    """The Pod that JobSet's Job `job_index` creates from `template` (see the module doc).

    A Secret volume becomes a read-only hostPath on `secret_dirs[secretName]`, the folder
    holding that Secret's files: podman 4.3 (Debian 12) crashes in `kube play` on a Secret
    volume (nil dereference in VolumeFromSecret)."""
    meta = copy.deepcopy(template.get("metadata", {}))
    annotations = {**meta.get("annotations", {}), JOB_INDEX_ANNOTATION: str(job_index),
                   "jobset.sigs.k8s.io/jobset-name": subdomain}
    spec = copy.deepcopy(template["spec"])
    spec["hostname"] = pod
    spec["subdomain"] = subdomain
    renamed = {v["name"]: f"{volume_prefix}-{v['name']}" for v in spec.get("volumes", [])}
    for volume in spec.get("volumes", []):
        volume["name"] = renamed[volume["name"]]
        if "secret" in volume:
            secret = volume.pop("secret")
            volume["hostPath"] = {"path": str(secret_dirs[secret["secretName"]]), "type": "Directory"}
    for c in spec["containers"]:
        c.pop("ports", None)
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            # They name the ports just removed, and podman would run httpGet probes with a curl
            # the images do not have; the health endpoints are tested in libs/runtime.
            c.pop(probe, None)
        for mount in c.get("volumeMounts", []):
            mount["name"] = renamed[mount["name"]]
        # The downward API fields podman does not resolve, resolved as the kubelet would.
        for e in c.get("env", []):
            if e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
                del e["valueFrom"]
                e["value"] = NAMESPACE
        # What the kubelet knows when it expands $(VAR): literal values and the job index.
        env = {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}
        for e in c.get("env", []):
            path = e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath", "")
            if path == f"metadata.annotations['{JOB_INDEX_ANNOTATION}']":
                env[e["name"]] = str(job_index)
        for key in ("command", "args"):
            if key in c:
                c[key] = [expand_refs(a, env) for a in c[key]]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "namespace": NAMESPACE, "labels": meta.get("labels", {}),
                         "annotations": annotations},
            "spec": spec}


def jobset_pods(jobset: dict[str, Any], *, volume_tag: str,
                secret_dirs: dict[str, Path]) -> list[dict[str, Any]]:
    """Every Pod of `jobset`, controller first, in JobSet's naming."""
    name = jobset["metadata"]["name"]
    pods = []
    for rjob in jobset["spec"]["replicatedJobs"]:
        for job_index in range(rjob["replicas"]):
            pod = f"{name}-{rjob['name']}-{job_index}-0"
            pods.append(pod_from_template(rjob["template"]["spec"]["template"], pod=pod, subdomain=name,
                                          job_index=job_index, volume_prefix=f"{pod}-{volume_tag}",
                                          secret_dirs=secret_dirs))
    return pods


def wait_mock_healthy(container: str, timeout: float = 60) -> None:
    """Until the mock server in `container` answers /health (RuntimeError with its log after `timeout`)."""
    probe = (f"import urllib.request; urllib.request.urlopen('http://127.0.0.1:{MOCK_PORT}/health', "
             "timeout=1).read()")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if podman("exec", container, "python3", "-c", probe, check=False).returncode == 0:
            return
        time.sleep(0.3)
    raise RuntimeError(f"mock server not healthy within {timeout}s: "
                       f"{podman('logs', container, check=False).stderr[-2000:]}")


def run_config(flags: ProfileFlags, *, runtime: RuntimeOptions,
               local: LocalFlags | None = None) -> RunConfig:
    """The run config `aiperf profile` would build from `flags` and `local` (output flags such as
    --export-level; libs/kube adapts it to the pods)."""
    built = build_benchmark(flags, local or LocalFlags(ui="none"))
    return RunConfig(run_id=uuid.uuid4().hex[:8], mode="profile", benchmark=built.benchmark,
                     comms=CommsOptions(ipc_dir="/tmp/unused"), runtime=runtime)


@dataclass
class PodsResult:
    """What a finished pod run left: the controller's exit code and log, its artifacts."""

    controller_exit: int | None
    controller_log: str
    artifacts: Path
    exit_codes: dict[str, int | None]
    timings: dict[str, float]
    logs: dict[str, str] = field(default_factory=dict)
    sidecar_status: dict[str, Any] = field(default_factory=dict)
    sidecar_exit: int | None = None

    def summary(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.artifacts / "profile_export_aiperf.json").read_text())
        return data

    def metric(self, tag: str, stat: str = "avg") -> float:
        value: float = self.summary()[tag][stat]
        return value

    def accounting(self) -> dict[str, Any]:
        ext: dict[str, Any] = self.summary()["aiperf_extensions"]
        return ext

    def records(self) -> list[dict[str, Any]]:
        lines = (self.artifacts / "profile_export.jsonl").read_bytes().splitlines()
        return [orjson.loads(line) for line in lines if line.strip()]


class PodRun:
    """One benchmark in pods: `start()`, optionally act mid-run, `wait()`, `close()` (always).

    `flags` is the benchmark (its URL should be http://mock:8000), `local` its output flags;
    `mock_args` the mock server's flags; the workers are split `total_workers` / `workers_per_pod`."""

    def __init__(self, flags: ProfileFlags, *, mock_args: Sequence[str], total_workers: int,
                 workers_per_pod: int, workdir: Path, runtime: RuntimeOptions | None = None,
                 local: LocalFlags | None = None) -> None:
        self.tag = uuid.uuid4().hex[:6]
        self.settings = KubeSettings(name=f"e2e-{self.tag}", namespace=NAMESPACE, image_registry="localhost",
                                     image_tag="latest", total_workers=total_workers,
                                     workers_per_pod=workers_per_pod)
        self.config = run_config(flags, runtime=runtime or RuntimeOptions(
            heartbeat_interval_s=1.0, registration_timeout_s=STARTUP_S, log_level="info"), local=local)
        self.mock_args = list(mock_args)
        self.workdir = workdir
        self.network = f"aiperf-{self.tag}"
        self.mock = f"aiperf-{self.tag}-mock"
        self.jobset = jobset_name(self.settings.name)
        objects = with_curve_keys(build_all(self.settings, self.config), CurveKeys.generate())
        (self.curve_secret,) = (o for o in objects if o["kind"] == "Secret")
        (self.config_map,) = (o for o in objects if o["kind"] == "ConfigMap")
        (jobset,) = (o for o in objects if o["kind"] == "JobSet")
        self.secret_dir = workdir / "curve-keys"
        self.pods = jobset_pods(jobset, volume_tag=self.tag,
                                secret_dirs={self.curve_secret["metadata"]["name"]: self.secret_dir})
        self.controller = self.pods[0]["metadata"]["name"]
        assert self.controller == pod_hostname(self.settings.name, "controller", 0)
        self.pod_files: dict[str, Path] = {}
        self.timings: dict[str, float] = {}
        self._t0 = time.monotonic()
        self._volumes: list[str] = []

    # -- set-up -------------------------------------------------------------------------

    def _mark(self, what: str) -> None:
        self.timings[what] = round(time.monotonic() - self._t0, 2)

    def start(self) -> PodRun:
        """Network, mock (healthy), then the controller pod and every worker pod."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        cm_file = self.workdir / "configmap.yaml"
        cm_file.write_text(yaml.safe_dump(self.config_map, sort_keys=False))
        self.secret_dir.mkdir()
        for key, value in self.curve_secret["data"].items():
            (self.secret_dir / key).write_bytes(base64.b64decode(value))
            (self.secret_dir / key).chmod(CURVE_FILE_MODE)
        for pod in self.pods:
            name = pod["metadata"]["name"]
            path = self.workdir / f"{name}.yaml"
            path.write_text(yaml.safe_dump(pod, sort_keys=False))
            self.pod_files[name] = path
            # emptyDirs by their (renamed) volume name; a ConfigMap volume by the ConfigMap's name.
            self._volumes += [v["configMap"]["name"] if "configMap" in v else v["name"]
                              for v in pod["spec"]["volumes"] if "hostPath" not in v]
        self._volumes = sorted(set(self._volumes))
        podman("network", "create", "--internal", self.network)
        podman("run", "-d", "--name", self.mock, "--network", self.network, "--network-alias", MOCK_ALIAS,
               MOCK_IMAGE, "--port", str(MOCK_PORT), *self.mock_args)
        wait_mock_healthy(self.mock)
        self._mark("mock_ready_s")
        for name, path in self.pod_files.items():
            host = f"{name}.{self.jobset}"
            podman("kube", "play", "--configmap", str(cm_file),
                   "--network", f"{self.network}:alias={host},alias={host}.{NAMESPACE}.svc.cluster.local",
                   str(path), timeout=180)
            self._mark(f"played_{name}_s")
        return self

    # -- during the run -----------------------------------------------------------------

    def container(self, pod: str, name: str) -> str:
        """The podman name of container `name` of pod `pod`."""
        return f"{pod}-{name}"

    def worker_pods(self) -> list[str]:
        return [p["metadata"]["name"] for p in self.pods[1:]]

    def volume_path(self, pod: str, volume: str) -> Path:
        """Host path of the (renamed) volume `volume` of `pod` (we are root: readable as is)."""
        renamed = f"{pod}-{self.tag}-{volume}"
        out = podman("volume", "inspect", renamed, "--format", "{{.Mountpoint}}").stdout.strip()
        return Path(out)

    def controller_artifacts(self) -> Path:
        return self.volume_path(self.controller, ARTIFACTS_VOLUME)

    def jsonl_count(self) -> int:
        try:
            data = (self.controller_artifacts() / "profile_export.jsonl").read_bytes()
        except (OSError, RuntimeError):
            return 0
        return sum(1 for line in data.splitlines() if line.strip())

    def exit_codes(self) -> dict[str, int | None]:
        """Exit code per container of every pod of this run (None while it runs)."""
        out = podman("ps", "-a", "--format", "json", check=False).stdout or "[]"
        prefixes = tuple(f"{pod}-" for pod in self.pod_files)
        codes: dict[str, int | None] = {}
        for c in json.loads(out):
            for name in c.get("Names") or []:
                if name.startswith(prefixes):
                    codes[name] = int(c["ExitCode"]) if c.get("Exited") or c.get("State") == "exited" else None
        return dict(sorted(codes.items()))

    def kill_pod(self, pod: str) -> None:
        """Lose worker pod `pod` at once (SIGKILL to every container), as a node failure would."""
        podman("pod", "kill", pod)
        self._mark(f"killed_{pod}_s")

    def wait_until(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}\n{self.debug()}")
            time.sleep(0.2)

    # -- the end ------------------------------------------------------------------------

    def wait(self, timeout: float = 300) -> PodsResult:
        """Until the controller's control plane exits; its results copied to workdir, then the
        results sidecar's status read and the sidecar shut down (see the module doc)."""
        sc = self.container(self.controller, CONTROL_PLANE_CONTAINER)
        self.wait_until(lambda: self.exit_codes().get(sc) is not None, timeout,
                        f"{sc} to exit")
        self._mark("controller_exited_s")
        # The other controller containers finish writing once the controller told them to stop.
        rm = self.container(self.controller, "records-manager")
        try:
            self.wait_until(lambda: self.exit_codes().get(rm) is not None, 30, f"{rm} to exit")
        except TimeoutError:
            pass
        out = self.workdir / "artifacts"
        shutil.copytree(self.controller_artifacts(), out, dirs_exist_ok=True)
        status, sidecar_exit = self._retire_sidecar()
        codes = self.exit_codes()
        logs = {name: self.logs(name) for name in codes}
        return PodsResult(controller_exit=codes.get(sc), controller_log=logs.get(sc, ""), artifacts=out,
                          exit_codes=codes, timings=dict(self.timings), logs=logs, sidecar_status=status,
                          sidecar_exit=sidecar_exit)

    def _retire_sidecar(self, timeout: float = STARTUP_S) -> tuple[dict[str, Any], int | None]:
        """The results sidecar's status once it has seen the run end (it notices the end marker
        within a second, a crash within `--gone-after-s`), then its exit code after POST /shutdown.
        `timeout` is the start-up bound: the sidecar is the pod's last container and, with a dozen
        containers unpacking their pex at once on 2 cores, may only listen a minute after the
        control plane has already finished.
        An unreachable sidecar gives an empty status (the test says so with the debug output)."""
        sidecar = self.container(self.controller, RESULTS_CONTAINER)
        status: dict[str, Any] = {}

        def ended() -> bool:
            nonlocal status
            r = podman("exec", sidecar, "python3", "-c", _SIDECAR_STATUS, check=False)
            status = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else {}
            return bool(status.get("ended"))

        try:
            self.wait_until(ended, timeout, f"{sidecar} to see the run end")
            podman("exec", sidecar, "python3", "-c", _SIDECAR_SHUTDOWN, check=False)
            self.wait_until(lambda: self.exit_codes().get(sidecar) is not None, 30, f"{sidecar} to exit")
        except TimeoutError:
            pass
        self._mark("sidecar_retired_s")
        return status, self.exit_codes().get(sidecar)

    def logs(self, container: str) -> str:
        r = podman("logs", container, check=False)
        return r.stdout + r.stderr

    def debug(self) -> str:
        """Exit codes and log tails of every container (for failure messages)."""
        lines = [f"exit codes: {self.exit_codes()}"]
        for name in self.exit_codes():
            tail = self.logs(name).strip().splitlines()[-15:]
            lines.append(f"--- {name}\n" + "\n".join(tail))
        lines.append(f"--- mock\n{podman('logs', self.mock, check=False).stderr[-1000:]}")
        return "\n".join(lines)

    def close(self) -> None:
        """Remove everything this run created; never raises (runs after failures too)."""
        for pod, path in self.pod_files.items():
            # SIGKILL first: --down would give every still-running container its 10 s stop timeout.
            podman("pod", "kill", pod, check=False)
            podman("kube", "play", "--down", str(path), check=False, timeout=120)
        podman("rm", "-f", "-t", "0", self.mock, check=False)
        if self._volumes:
            podman("volume", "rm", "-f", *self._volumes, check=False)
        podman("network", "rm", "-f", self.network, check=False)
        self._mark("cleaned_up_s")

    def __enter__(self) -> PodRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
