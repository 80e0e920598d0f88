"""A cluster for end-to-end tests of the operator: the fake API server (`FakeKube`), with the
JobSet controller and the kubelet played on podman (`PodmanCluster`).

What it plays, for every JobSet stored in the fake:

- the JobSet controller: the Pods a JobSet creates (JobSet's naming, owned by the JobSet,
  labelled with the template's labels and JobSet's `jobset-name`, `jobset-uid`,
  `replicatedjob-name` and `job-index` labels), created through the fake's store; the JobSet's `Completed`/`Failed` condition once its controller job's pod
  ends (Failed as soon as any pod fails, as JobSet's default failure policy does);
- JobSet restarts: a JobSet whose pod fails while `status.restarts` is below its
  `failurePolicy.maxRestarts` is restarted instead, as JobSet does: `status.restarts` goes up,
  every pod of the attempt is torn down and its Pod deleted, and the JobSet's pods are created
  and played again (same hostnames, pod names with a `-r<attempt>` suffix, the
  `jobset.sigs.k8s.io/restart-attempt` label, fresh emptyDir volumes);
- the kubelet: each Pod is played with `podman kube play` on the run's own internal network,
  translated as tests/kube/_podman.py does (volumes made unique, `$(VAR)` expanded, Secret
  volumes as hostPath folders of the Secret's decoded files; each pod also gets its own copy
  of a ConfigMap volume, which podman names after the ConfigMap), plus what a kubelet adds: the
  ServiceAccount token, CA and namespace at /var/run/secrets/kubernetes.io/serviceaccount (a
  token the fake maps to the pod's ServiceAccount) and KUBERNETES_SERVICE_HOST/PORT naming the
  fake API server, which listens on the network's gateway so pods reach it as in a cluster.
  Container states (running, terminated with the exit code) are mirrored into the fake; a pod
  whose image podman does not have stays Pending with `ErrImagePull`; `pods/proxy` to a running
  container's port is forwarded to the container's IP;
- deletion and suspension: a JobSet that goes, is being deleted or is suspended has its pods
  torn down in podman (a suspended JobSet's pods are deleted first, as its Jobs' controller
  does) and their fake Pods finished.

Pods belong to a JobSet by its UID, as a JobSet's Jobs do, so a JobSet created again under the
same name (a CR deleted and created again) never sees the old one's pods: its pods are played
once the old ones are torn down (the pod names here come from the JobSet's name, where a Job
controller's would carry a random suffix).

podman runs in worker threads; the fake's store is read and written on the event loop only (it
is not thread-safe: a write wakes watches through asyncio queues and events, which belong to the
loop).

What it does not play: scheduling (every pod fits), container restarts (pods are
`restartPolicy: Never`), readiness probes (stripped, see _podman.py).
"""

from __future__ import annotations

import base64
import copy
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import yaml
from kube._podman import pod_from_template, podman

from aiperf.kube.containers import JOB_INDEX_ANNOTATION
from aiperf.kube.curve_secret import CURVE_FILE_MODE
from aiperf.kube.jobset import JOBSET_API_VERSION
from aiperf.kubeapi import Obj
from aiperf.testing.fake_kube import FakeKube
from aiperf.testing.fake_kube_api import ApiError
from aiperf.testing.fake_kube_proxy import forward_to
from aiperf.testing.fake_kube_select import Selector
from aiperf.testing.fake_kube_store import now_rfc3339

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
POLL_S = 0.5
"""How often container states are read from podman (a controller loop, not a test wait)."""


def network_gateway(network: str) -> str:
    """The host-side address of podman network `network` (exists once a container joined)."""
    info = json.loads(podman("network", "inspect", network).stdout)[0]
    return str(info["subnets"][0]["gateway"])


def _exited(container: dict[str, Any]) -> bool:
    """A container of `podman ps -a --format json` has exited."""
    return bool(container.get("Exited") or container.get("State") == "exited")


@dataclass
class _PlayedPod:
    namespace: str
    name: str
    jobset: str
    jobset_uid: str
    controller: bool
    file: Path
    containers: list[str]
    volumes: list[str]
    ip: str | None = None
    running: bool = False
    ended: dict[str, int] = field(default_factory=dict)
    pull_error: str | None = None


class PodmanCluster:
    """Plays JobSets stored in `kube` on podman network `network` (see the module doc).

    Use inside a task group: `tg.start_soon(cluster.run)`; `close()` tears down every pod it
    played. `api_host`/`api_port`: where pods reach the fake API server (https), `ca` its CA
    certificate (the pods' ServiceAccount `ca.crt`)."""

    def __init__(self, kube: FakeKube, *, network: str, workdir: Path, api_host: str, api_port: int,
                 ca: Path) -> None:
        self.kube, self.ca = kube, ca
        self.network = network
        self.workdir = workdir
        self.api_host, self.api_port = api_host, api_port
        self.pods: dict[tuple[str, str], _PlayedPod] = {}
        self._started: set[str] = set()  # uids of the JobSets started
        self._finished: set[str] = set()  # uids whose terminal condition is written
        self._restart_due: dict[str, int] = {}  # uid -> the restart attempt to play
        self._restarting: set[str] = set()  # uids whose restart is under way
        self.logs: dict[tuple[str, str], str] = {}  # (pod, container) -> its output once it exited

    # -- the loop -------------------------------------------------------------------------------

    async def run(self) -> None:
        """Forever: start new JobSets, mirror container states, tear down deleted JobSets."""
        async with anyio.create_task_group() as tg:
            while True:
                for uid, jobset in self._stored_jobsets().items():
                    if (uid not in self._started and not jobset["metadata"].get("deletionTimestamp")
                            and not self._name_held(jobset)):
                        self._started.add(uid)
                        tg.start_soon(self._start, copy.deepcopy(jobset))
                for uid, attempt in list(self._restart_due.items()):
                    if uid not in self._restarting:
                        self._restarting.add(uid)
                        tg.start_soon(self._restart, uid, attempt)
                running = [(p.name, c) for p in self.pods.values() for c in p.containers if c not in p.ended]
                states = await anyio.to_thread.run_sync(self._container_states, running)
                self._mirror(states)
                await self._teardown_gone()
                await anyio.sleep(POLL_S)

    def _name_held(self, jobset: Obj) -> bool:
        """Pods of an older JobSet of this name are still played (torn down first: pod names
        here are the JobSet's, not unique as a Job controller's are)."""
        meta = jobset["metadata"]
        return any((p.namespace, p.jobset) == (meta["namespace"], meta["name"]) and p.jobset_uid != meta["uid"]
                   for p in self.pods.values())

    def _stored_jobsets(self) -> dict[str, Obj]:
        info = self.kube.kind(JOBSET_API_VERSION, "JobSet")
        return {o["metadata"]["uid"]: o for o in self.kube.store.list_objects(info, None, Selector.parse(None, None))}

    # -- the JobSet controller ----------------------------------------------------------------------

    async def _start(self, jobset: Obj, attempt: int = 0) -> None:
        """Create the JobSet's Pods in the fake, then play each on podman (controller first)."""
        ns, name = jobset["metadata"]["namespace"], jobset["metadata"]["name"]
        owner = {"apiVersion": JOBSET_API_VERSION, "kind": "JobSet", "name": name,
                 "uid": jobset["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
        for rjob in jobset["spec"]["replicatedJobs"]:
            for index in range(rjob["replicas"]):
                hostname = f"{name}-{rjob['name']}-{index}-0"
                pod_name = f"{hostname}-r{attempt}" if attempt else hostname
                template = rjob["template"]["spec"]["template"]
                meta = template.get("metadata") or {}
                spec = copy.deepcopy(template["spec"])
                spec.update(hostname=hostname, subdomain=name)
                self.kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
                    "name": pod_name, "namespace": ns, "ownerReferences": [owner],
                    "labels": {**(meta.get("labels") or {}), JOBSET_LABEL: name, JOBSET_UID_LABEL: owner["uid"],
                               REPLICATED_JOB_LABEL: rjob["name"],
                               JOB_INDEX_LABEL: str(index), RESTART_ATTEMPT_LABEL: str(attempt)},
                    "annotations": {**(meta.get("annotations") or {}), JOB_INDEX_ANNOTATION: str(index),
                                    JOBSET_LABEL: name}},
                    "spec": spec})
                played, args = self._prepare(jobset, template, pod_name, hostname, index,
                                             rjob is jobset["spec"]["replicatedJobs"][0])
                played.pull_error, played.ip = await anyio.to_thread.run_sync(self._play, played, args,
                                                                              f"{hostname}.{name}")

    async def _restart(self, uid: str, attempt: int) -> None:
        """Restart attempt `attempt` of JobSet `uid`: count it, tear its pods down, play them again."""
        try:
            jobset = self._stored_jobsets().get(uid)
            if jobset is None or jobset["metadata"].get("deletionTimestamp") or jobset["spec"].get("suspend"):
                return
            ns, name = jobset["metadata"]["namespace"], jobset["metadata"]["name"]
            self.kube.set_status(JOBSET_API_VERSION, "JobSet", ns, name,
                                 {**(jobset.get("status") or {}), "restarts": attempt})
            for played in [p for p in self.pods.values() if p.jobset_uid == uid]:
                await self._tear_down(played)
            await self._start(copy.deepcopy(jobset), attempt)
        finally:
            self._restart_due.pop(uid, None)
            self._restarting.discard(uid)

    def _prepare(self, jobset: Obj, template: Obj, pod_name: str, hostname: str, index: int,
                 controller: bool) -> tuple[_PlayedPod, list[str]]:
        """The pod file `podman kube play` takes for one pod, as the kubelet would run it (see the
        module doc), and the extra arguments of the play; the pod is recorded as played."""
        ns, name = jobset["metadata"]["namespace"], jobset["metadata"]["name"]
        folder = self.workdir / pod_name
        folder.mkdir(parents=True, exist_ok=True)
        tag = jobset["metadata"]["uid"][:6]
        secret_dirs = {}
        for volume in template["spec"].get("volumes") or []:
            if "secret" in volume:
                secret_name = volume["secret"]["secretName"]
                secret_dirs[secret_name] = self._secret_dir(ns, secret_name, folder)
        pod = pod_from_template(template, pod=pod_name, subdomain=name, job_index=index,
                                volume_prefix=f"{pod_name}-{tag}", secret_dirs=secret_dirs)
        pod["metadata"]["namespace"] = ns
        pod["spec"]["hostname"] = hostname
        self._add_service_account(pod, ns, folder)
        args = []
        for volume in pod["spec"]["volumes"]:
            if "configMap" not in volume:
                continue
            # podman names a ConfigMap volume after the ConfigMap: one of the pod's own, so that
            # tearing this pod down never removes (`volume rm -f`: stopping and removing every
            # container that mounts it) a volume the run's other pods still use.
            cm_name = volume["configMap"]["name"]
            cm = self.kube.get("v1", "ConfigMap", ns, cm_name) or {}
            volume["configMap"]["name"] = own = f"{pod_name}-{tag}-{cm_name}"
            cm_file = folder / f"{cm_name}.yaml"
            cm_file.write_text(yaml.safe_dump({"apiVersion": cm["apiVersion"], "kind": cm["kind"],
                                               "metadata": {**cm["metadata"], "name": own}, "data": cm["data"]}))
            args += ["--configmap", str(cm_file)]
        path = folder / "pod.yaml"
        path.write_text(yaml.safe_dump(pod, sort_keys=False))
        played = _PlayedPod(namespace=ns, name=pod_name, jobset=name, jobset_uid=jobset["metadata"]["uid"],
                            controller=controller, file=path,
                            containers=[c["name"] for c in pod["spec"]["containers"]],
                            volumes=[v["configMap"]["name"] if "configMap" in v else v["name"]
                                     for v in pod["spec"]["volumes"] if "hostPath" not in v])
        self.pods[(ns, pod_name)] = played
        return played, args

    def _play(self, played: _PlayedPod, args: list[str], host: str) -> tuple[str | None, str | None]:
        """`podman kube play` a prepared pod (in a worker thread: podman only, never the fake):
        (the pull error, None) when podman could not play it, else (None, its IP)."""
        podman("pod", "rm", "-f", "-t", "0", played.name, check=False)  # a leftover of an interrupted test
        result = podman("kube", "play", *args, "--network",
                        f"{self.network}:alias={host},alias={host}.{played.namespace}.svc.cluster.local",
                        str(played.file), check=False, timeout=180)
        if result.returncode != 0:
            return result.stderr.strip()[-500:], None
        info = json.loads(podman("pod", "inspect", played.name).stdout)
        infra = (info[0] if isinstance(info, list) else info)["InfraContainerID"]
        networks = json.loads(podman("inspect", infra).stdout)[0]["NetworkSettings"]["Networks"]
        return None, str(networks[self.network]["IPAddress"])

    def _secret_dir(self, ns: str, secret_name: str, folder: Path) -> Path:
        """A folder holding the Secret's keys as files (what a Secret volume shows)."""
        secret = self.kube.get("v1", "Secret", ns, secret_name) or {}
        out = folder / f"secret-{secret_name}"
        out.mkdir(exist_ok=True)
        for key, value in (secret.get("data") or {}).items():
            (out / key).write_bytes(base64.b64decode(value))
            (out / key).chmod(CURVE_FILE_MODE)
        return out

    def _add_service_account(self, pod: Obj, ns: str, folder: Path) -> None:
        """What the kubelet and the ServiceAccount admission plugin add to every container."""
        account = pod["spec"].get("serviceAccountName") or "default"
        sa_dir = folder / "serviceaccount"
        sa_dir.mkdir(exist_ok=True)
        (sa_dir / "token").write_text(self.kube.token_for(ns, account))
        (sa_dir / "namespace").write_text(ns)
        shutil.copyfile(self.ca, sa_dir / "ca.crt")
        for f in sa_dir.iterdir():
            f.chmod(0o444)
        volume = f"{pod['metadata']['name']}-sa"
        pod["spec"]["volumes"].append({"name": volume, "hostPath": {"path": str(sa_dir), "type": "Directory"}})
        for c in pod["spec"]["containers"]:
            c.setdefault("volumeMounts", []).append({"name": volume, "mountPath": SA_DIR, "readOnly": True})
            c.setdefault("env", []).extend([{"name": "KUBERNETES_SERVICE_HOST", "value": self.api_host},
                                            {"name": "KUBERNETES_SERVICE_PORT", "value": str(self.api_port)}])

    # -- the kubelet ------------------------------------------------------------------------------

    def _container_states(self, running: list[tuple[str, str]]) -> dict[str, Any]:
        """Every podman container's state by name (in a worker thread: podman only, never the
        fake); the output of each of `running` (pod, container) that has exited is kept in `logs`."""
        out = podman("ps", "-a", "--format", "json", check=False).stdout or "[]"
        states = {name: c for c in json.loads(out) for name in c.get("Names") or []}
        for pod, container in running:
            c = states.get(f"{pod}-{container}")
            if c is not None and _exited(c):
                logs = podman("logs", f"{pod}-{container}", check=False)
                self.logs[(pod, container)] = logs.stdout + logs.stderr
        return states

    def _mirror(self, states: dict[str, Any]) -> None:
        """Container states (`_container_states`) into the fake; JobSet conditions from the pods.
        On the event loop: the fake's store is not thread-safe."""
        for played in list(self.pods.values()):
            try:
                self._mirror_pod(played, states)
            except ApiError as exc:
                if exc.code != 404:
                    raise
                # Deleted while we mirrored it (garbage collection, a teardown): nothing to mirror.
        self._finish_jobsets()

    def _mirror_pod(self, played: _PlayedPod, states: dict[str, Any]) -> None:
        """One played pod's container states into the fake (ApiError 404 when its Pod went)."""
        if self.kube.get("v1", "Pod", played.namespace, played.name) is None:
            return
        if played.pull_error is not None:
            for container in played.containers:
                self._set_waiting(played, container, "ErrImagePull", played.pull_error)
            return
        if played.ip is None:
            return
        if not played.running:
            played.running = True
            self.kube.run_pod(played.namespace, played.name, ip=played.ip)
            self._register_proxies(played)
        for container in played.containers:
            c = states.get(f"{played.name}-{container}")
            if c is None or container in played.ended:
                continue
            if _exited(c):
                played.ended[container] = int(c["ExitCode"])
                self._set_terminated(played, container, int(c["ExitCode"]))
        if len(played.ended) == len(played.containers):
            self.kube.terminate_pod(played.namespace, played.name, dict(played.ended))

    def _set_waiting(self, played: _PlayedPod, container: str, reason: str, message: str) -> None:
        pod = self.kube.get("v1", "Pod", played.namespace, played.name) or {}
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if status["name"] == container and (status.get("state") or {}).get("waiting", {}).get("reason") == reason:
                return
        self.kube.pods.set_container_state(played.namespace, played.name, container,
                                           {"waiting": {"reason": reason, "message": message}})

    def _set_terminated(self, played: _PlayedPod, container: str, code: int) -> None:
        self.kube.pods.set_container_state(played.namespace, played.name, container, {"terminated": {
            "exitCode": code, "reason": "Completed" if code == 0 else "Error"}})

    def _finish_jobsets(self) -> None:
        for uid, jobset in self._stored_jobsets().items():
            if uid in self._finished or uid in self._restart_due:
                continue
            mine = [p for p in list(self.pods.values()) if p.jobset_uid == uid]
            pods = [self.kube.get("v1", "Pod", p.namespace, p.name) or {} for p in mine]
            phases = [(p, (o.get("status") or {}).get("phase")) for p, o in zip(mine, pods, strict=True)]
            failed = any(phase == "Failed" for _, phase in phases)
            done = any(p.controller and phase == "Succeeded" for p, phase in phases)
            restarts = int((jobset.get("status") or {}).get("restarts") or 0)
            limit = int((jobset["spec"].get("failurePolicy") or {}).get("maxRestarts") or 0)
            if failed and not done and restarts < limit:
                self._restart_due[uid] = restarts + 1
            elif failed or done:
                self._finished.add(uid)
                kind = "Failed" if failed else "Completed"
                self.kube.set_status(JOBSET_API_VERSION, "JobSet", jobset["metadata"]["namespace"],
                                     jobset["metadata"]["name"], {
                                         "conditions": [{"type": kind, "status": "True", "reason": f"AllJobs{kind}",
                                                         "message": f"jobset {kind.lower()}",
                                                         "lastTransitionTime": now_rfc3339()}],
                                         "terminalState": kind})

    def _register_proxies(self, played: _PlayedPod) -> None:
        pod = self.kube.get("v1", "Pod", played.namespace, played.name) or {}
        for c in pod["spec"]["containers"]:
            for port in c.get("ports") or []:
                self.kube.register_proxy(played.namespace, played.name, port["containerPort"],
                                         forward_to(f"http://{played.ip}:{port['containerPort']}"),
                                         container=c["name"])

    # -- deletion ---------------------------------------------------------------------------------

    async def _teardown_gone(self) -> None:
        live = {uid for uid, j in self._stored_jobsets().items()
                if not j["metadata"].get("deletionTimestamp") and not j["spec"].get("suspend")}
        for played in list(self.pods.values()):
            if played.jobset_uid not in live:
                await self._tear_down(played)

    async def _tear_down(self, played: _PlayedPod) -> None:
        """Stop playing `played`: its Pod deleted in the fake, its containers and volumes in podman."""
        if self.pods.pop((played.namespace, played.name), None) is None:
            return
        pod = self.kube.get("v1", "Pod", played.namespace, played.name)
        if pod is not None and not pod["metadata"].get("deletionTimestamp"):
            self.kube.store.delete(self.kube.kind("v1", "Pod"), played.namespace, played.name, {})
        await anyio.to_thread.run_sync(self._down, played)
        if self.kube.get("v1", "Pod", played.namespace, played.name) is not None:
            self.kube.finish_pod(played.namespace, played.name)

    @staticmethod
    def _down(played: _PlayedPod) -> None:
        podman("pod", "kill", played.name, check=False)
        podman("kube", "play", "--down", str(played.file), check=False, timeout=120)
        if played.volumes:
            podman("volume", "rm", "-f", *played.volumes, check=False)

    def log_tail(self, pod: str, container: str, lines: int = 40) -> str:
        """The last `lines` of what container `container` of pod `pod` wrote before it exited (for
        a failing test's message; empty while it runs)."""
        return "\n".join(self.logs.get((pod, container), "").splitlines()[-lines:])

    def close(self) -> None:
        """Tear down every pod still played (never raises)."""
        for played in list(self.pods.values()):
            self._down(played)
        self.pods.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)


