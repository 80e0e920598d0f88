"""`aiperf kube debug NAME`: what blocks a run, on one screen (or as JSON with `-o json`).

Reads only: the AIPerfJob NAME (operator mode, when the cluster serves the CRD and it exists),
the JobSet `aiperf-NAME`, its pods, and the namespace's Events about the run's objects (the
AIPerfJob, the JobSet, its Jobs and pods, matched by kind and name). Direct mode (no AIPerfJob)
shows the same without the CR part. The report ends with a one-line verdict: how the run ended,
else the highest-priority startup blocker of its pods (`aiperf.kube.diagnosis`, with the
operator's first sighting when it recorded the same one), else what it waits for.

Exit 0 whenever the report is printed (whatever the run's state), 2 when neither an AIPerfJob
nor a JobSet of that name exists, 1 when the cluster cannot be read. Events that cannot be
listed (no RBAC grant) leave the rest of the report intact, with the reason (`eventsError`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from aiperf.cli.kube_shared import EXIT_OK
from aiperf.crd.model import JOB_KIND
from aiperf.kube.diagnosis import Blocker, classify, describe
from aiperf.kube.names import CONTROLLER_JOB, WORKERS_JOB, WORKERS_LAST_JOB, jobset_name
from aiperf.kube.names import REPLICATED_JOB_LABEL as ROLE_LABEL
from aiperf.kubeapi import KubeApi, KubeClusterError, KubeError, Obj, event_time
from aiperf.kuberun import direct

SHOWN_EVENTS = 20
"""Events the text report shows (the newest); `-o json` has all of them."""
_EXPLAINS = (("StartupFailed", "True"), ("TimedOut", "True"), ("ConfigValid", "False"),
             ("ResourcesCreated", "False"), ("WorkersReady", "False"), ("Succeeded", "False"))
"""Conditions that say why a run ended, most specific first."""


async def debug_run(api: KubeApi, name: str, namespace: str, job: Obj | None,
                    output_format: Literal["text", "json"]) -> int:
    """`kube debug`: print the report of run `name` (see the module doc); `job` is its AIPerfJob
    as just read (None: direct mode)."""
    jobset = await direct.get_jobset(api, name, namespace)
    if job is None and jobset is None:
        raise KubeError(f"no run {name} in namespace {namespace}: neither an AIPerfJob {name} nor a JobSet "
                        f"{jobset_name(name)}; see `aiperf kube list -n {namespace}`")
    pods = await direct.list_pods(api, name, namespace)
    try:
        events, events_error = await direct.list_events(api, namespace), None
    except KubeClusterError as exc:  # e.g. no RBAC grant on events: the rest still helps
        events, events_error = [], str(exc)
    report = build_report(name, namespace, job=job, jobset=jobset, pods=pods, events=events)
    if events_error is not None:
        report["eventsError"] = events_error
    print(json.dumps(report, indent=2) if output_format == "json" else render(report))
    return EXIT_OK


def build_report(name: str, namespace: str, *, job: Mapping[str, Any] | None, jobset: Mapping[str, Any] | None,
                 pods: Sequence[Mapping[str, Any]], events: Sequence[Mapping[str, Any]]) -> Obj:
    """The report (plain data, what `-o json` prints) from what was read; pure."""
    blocker = classify(pods)
    report: Obj = {"name": name, "namespace": namespace, "mode": "operator" if job is not None else "direct",
                   "job": _job(job) if job is not None else None,
                   "jobset": {"name": jobset["metadata"]["name"], "state": str(direct.jobset_state(jobset)),
                              "uid": jobset["metadata"].get("uid")} if jobset is not None else None,
                   "pods": [_pod(p) for p in pods],
                   "events": [_event(e) for e in events if _about_run(e, name, jobset, pods)],
                   "blocker": blocker.as_status(_first_seen(job, blocker)) if blocker is not None else None}
    report["verdict"] = verdict(report)
    return report


def _job(job: Mapping[str, Any]) -> Obj:
    status = job.get("status") or {}
    return {"phase": status.get("phase"), "subPhase": status.get("subPhase"),
            "conditions": [{k: c.get(k) for k in ("type", "status", "reason", "message")}
                           for c in status.get("conditions") or []],
            "startupIssue": status.get("startupIssue"), "cancel": (job.get("spec") or {}).get("cancel") is True}


def _first_seen(job: Mapping[str, Any] | None, blocker: Blocker) -> str | None:
    """The operator's first sighting of `blocker` (None when it recorded another or none)."""
    issue = ((job or {}).get("status") or {}).get("startupIssue") or {}
    return issue.get("firstObservedTime") if issue.get("fingerprint") == blocker.fingerprint else None


def _pod(pod: Mapping[str, Any]) -> Obj:
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    containers = [_container(cs, init=key == "initContainerStatuses")
                  for key in ("initContainerStatuses", "containerStatuses") for cs in status.get(key) or []]
    return {"name": meta.get("name"), "role": (meta.get("labels") or {}).get(ROLE_LABEL),
            "phase": status.get("phase") or "Pending", "node": (pod.get("spec") or {}).get("nodeName"),
            "terminating": bool(meta.get("deletionTimestamp")), "containers": containers}


def _container(cs: Mapping[str, Any], *, init: bool) -> Obj:
    state = cs.get("state") or {}
    which = next(iter(state), "unknown")
    detail = state.get(which) or {}
    out: Obj = {"name": cs.get("name"), "init": init, "state": which, "ready": bool(cs.get("ready")),
                "restarts": int(cs.get("restartCount") or 0)}
    for key in ("reason", "message", "exitCode"):
        if detail.get(key) is not None:
            out[key] = detail[key]
    return out


def _about_run(event: Mapping[str, Any], name: str, jobset: Mapping[str, Any] | None,
               pods: Sequence[Mapping[str, Any]]) -> bool:
    """Whether `event` is about one of the run's objects: the AIPerfJob, the JobSet, a Job or a
    pod of it (also pods already gone: their names follow JobSet's pattern)."""
    involved = event.get("involvedObject") or event.get("regarding") or {}
    kind, obj = involved.get("kind"), str(involved.get("name") or "")
    js = jobset_name(name)
    if kind == JOB_KIND:
        return obj == name
    if kind == "JobSet":
        return obj == js
    roles = {CONTROLLER_JOB, WORKERS_JOB, WORKERS_LAST_JOB} | {
        str(rj.get("name")) for rj in ((jobset or {}).get("spec") or {}).get("replicatedJobs") or []}
    pattern = rf"{re.escape(js)}-({'|'.join(map(re.escape, sorted(roles)))})-\d+(-\d+(-[a-z0-9]+)?)?"
    if kind in ("Job", "Pod"):
        return re.fullmatch(pattern, obj) is not None or obj in {p["metadata"]["name"] for p in pods}
    return False


def _event(event: Mapping[str, Any]) -> Obj:
    involved = event.get("involvedObject") or event.get("regarding") or {}
    return {"time": event_time(event), "type": event.get("type"), "reason": event.get("reason"),
            "object": f"{involved.get('kind')}/{involved.get('name')}", "count": event.get("count") or 1,
            "message": " ".join(str(event.get("message") or event.get("note") or "").split())}


def verdict(report: Mapping[str, Any]) -> str:
    """One line: how the run ended, else what blocks it, else what it waits for."""
    name, job, jobset = report["name"], report["job"], report["jobset"]
    pods, blocker = report["pods"], report["blocker"]
    phase = (job or {}).get("phase")
    state = (jobset or {}).get("state")
    if phase in ("Completed", "Failed", "Cancelled"):
        why = _why(job["conditions"]) if phase != "Completed" else ""
        return f"run {name} ended {phase}" + (f": {why}" if why else "")
    if job is None and state in ("Completed", "Failed", "Suspended"):
        return f"run {name} ended {state}" + (" (cancelled: the JobSet is suspended)" if state == "Suspended" else "")
    if job is not None and job.get("cancel"):
        return f"run {name} is being cancelled"
    if blocker is not None:
        since = f" since {blocker['firstObservedTime']}" if blocker.get("firstObservedTime") else ""
        what = ("critical: the operator fails the run if it persists" if job is not None else
                "critical: it will not resolve by itself") if blocker["critical"] else \
            "retryable: it waits for room in the cluster"
        return f"blocked by {describe(blocker)}{since} ({what}): {blocker['message']}".rstrip(": ")
    if job is not None and phase in (None, "Pending"):
        waiting = next((c for c in job["conditions"] if c["type"] == "ResourcesCreated" and c["status"] == "False"),
                       None)
        if waiting is not None:
            return f"waiting: {waiting['reason']}: {waiting['message']}"
        return "the operator has not created the run's objects yet; is the aiperf operator running?"
    if jobset is None:
        return f"the JobSet {jobset_name(name)} is gone; see the events above"
    if not pods:
        return f"no pods yet: the JobSet {jobset['name']} has created none; see the events above (is the JobSet " \
               "controller running?)"
    running = sum(1 for p in pods if p["phase"] == "Running")
    if running == len(pods):
        return f"nothing blocks the run: {running} of {len(pods)} pods running"
    return f"starting: {running} of {len(pods)} pods running, no blocker found"


def _why(conditions: Sequence[Mapping[str, Any]]) -> str:
    for type_, status in _EXPLAINS:
        for cond in conditions:
            if cond.get("type") == type_ and cond.get("status") == status:
                return f"{cond.get('reason')}: {cond.get('message')}" if cond.get("message") else str(cond.get("reason"))
    return ""


def render(report: Mapping[str, Any]) -> str:
    """The text report: run, pods with their containers, events, verdict."""
    name, namespace, job, jobset = report["name"], report["namespace"], report["job"], report["jobset"]
    lines: list[str] = []
    if job is not None:
        lines.append(f"AIPerfJob {namespace}/{name}: {job['phase'] or '(no phase yet)'}"
                     + (f", sub-phase {job['subPhase']}" if job.get("subPhase") else ""))
        for c in job["conditions"]:
            lines.append(f"  {c['type']}={c['status']} {c.get('reason') or ''}"
                         + (f": {c['message']}" if c.get("message") else ""))
        issue = job.get("startupIssue")
        if issue:
            lines.append(f"  startupIssue: {describe(issue)} since {issue.get('firstObservedTime')} "
                         f"({'critical' if issue.get('critical') else 'retryable'}): {issue.get('message') or ''}")
    else:
        lines.append(f"run {namespace}/{name} (direct mode: no AIPerfJob)")
    lines.append(f"JobSet {jobset['name']}: {jobset['state']}" if jobset is not None
                 else f"JobSet {jobset_name(name)}: none")
    lines.append(f"PODS ({len(report['pods'])})")
    for pod in report["pods"]:
        lines.append(f"  {pod['name']}  {pod['phase']}" + (" (terminating)" if pod["terminating"] else "")
                     + (f"  on {pod['node']}" if pod.get("node") else "  (not scheduled)"))
        for c in pod["containers"]:
            lines.append(f"    {'init ' if c['init'] else ''}{c['name']}: {_state(c)}")
    events = report["events"]
    if report.get("eventsError"):
        lines.append(f"EVENTS: not available: {report['eventsError']}")
    else:
        lines.append(f"EVENTS ({len(events)})" + (f", the last {SHOWN_EVENTS}" if len(events) > SHOWN_EVENTS else ""))
    for e in events[-SHOWN_EVENTS:]:
        lines.append(f"  {e['time']}  {e['type']}  {e['object']}  {e['reason']}"
                     + (f" (x{e['count']})" if e["count"] > 1 else "") + f": {e['message']}")
    lines.append(f"VERDICT: {report['verdict']}")
    return "\n".join(lines)


def _state(c: Mapping[str, Any]) -> str:
    text = c["state"]
    if c["state"] == "terminated":
        text += f" exit {c.get('exitCode')}"
    if c.get("reason"):
        text += f" {c['reason']}"
    if c.get("message"):
        text += f": {c['message']}"
    if c["restarts"]:
        text += f" (restarts {c['restarts']})"
    return text
