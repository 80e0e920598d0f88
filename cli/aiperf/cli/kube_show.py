"""`kube show`: a run's AIPerfJob rendered for people, live (`kube show NAME`) or from a file
before it is applied (`kube show -f CR.yaml`: `${VAR}` and `${VAR:default}` resolved from the
environment and Jinja2 `variables` rendered, as AIPerf's `kube show` does; checked as `kube
validate` checks it, and what the operator would create for it).

`-o yaml|json` prints the object itself instead (live: as stored; a file: with `${VAR}`s
resolved). Exit 0 shown, 1 a file's CR is invalid, 2 no such run or an unreadable file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml

from aiperf.cli.kube_operator import compact
from aiperf.cli.kube_runs import age, now
from aiperf.cli.kube_shared import EXIT_FAILED, EXIT_OK, EXIT_USER_ERROR, error
from aiperf.config import ConfigError
from aiperf.config.templating import render_document
from aiperf.crd.model import JOB_KIND, SWEEP_KIND, AIPerfJobSpec, AIPerfSweepSpec, decode_spec
from aiperf.crd.validation import validate_resource
from aiperf.kube.layout import WorkerLayout
from aiperf.kube.names import config_map_name, curve_secret_name, jobset_name
from aiperf.kubeapi import Obj
from aiperf.kuberun.direct import jobset_state

Format = Literal["text", "yaml", "json"]
def _rendered(doc: Any, environ: Mapping[str, str]) -> Any:
    """A CR document with its spec's `${VAR}` references and Jinja2 templates resolved."""
    if isinstance(doc, dict) and isinstance(doc.get("spec"), dict):
        spec = render_document(doc["spec"], environ)
        spec.pop("variables", None)
        return {**doc, "spec": spec}
    return doc


def _dump(doc: Any, fmt: Format) -> str:
    if fmt == "json":
        return json.dumps(doc, indent=2) + "\n"
    return yaml.safe_dump(doc, sort_keys=False)


def _fields(rows: list[tuple[str, str | None]]) -> list[str]:
    shown = [(k, v) for k, v in rows if v not in (None, "")]
    width = max(len(k) for k, _ in shown) + 2
    return [f"{k + ':':<{width}}{v}" for k, v in shown]


def _phase_line(phase: Any) -> str:
    doc = compact(phase)
    name = doc.pop("name", None) or doc.pop("type", "?")
    return f"{name}: " + ", ".join(f"{k}={v}" for k, v in doc.items())


def _spec_lines(spec: AIPerfJobSpec | AIPerfSweepSpec) -> list[str]:
    b, envelope = spec.benchmark, spec.envelope
    lines = _fields([
        ("Model", ", ".join(b.models)), ("Endpoint", f"{b.endpoint.type} {', '.join(b.endpoint.urls)}"
                                                      + (" (streaming)" if b.endpoint.streaming else "")),
        ("Image", envelope.image or "the operator's default"),
        ("Timeout", f"{envelope.timeout_seconds:g}s" if envelope.timeout_seconds else None),
        ("Cancel", "requested" if envelope.cancel else None),
    ])
    return [*lines, "Phases:", *(f"  {_phase_line(p)}" for p in b.phases)]


def _layout(spec: AIPerfJobSpec) -> WorkerLayout:
    """How the operator splits the workers (its defaults where the spec is silent)."""
    per_pod = spec.workers_per_pod
    return WorkerLayout.split(total_workers=spec.total_workers(), workers_per_pod=per_pod,
                              record_processors_per_pod=spec.benchmark.runtime.record_processors_per_pod
                              or max(1, per_pod // 4))


def _would_create(name: str, spec: AIPerfJobSpec) -> list[str]:
    layout = _layout(spec)
    split = f"{layout.full_pods} of {layout.workers_per_pod}" + (
        f" and 1 of {layout.last_pod_workers}" if layout.last_pod_workers is not None else "")
    own_account = spec.pod_template is None or spec.pod_template.service_account_name is None
    rbac = "ServiceAccount, Role, RoleBinding" if own_account else "Role, RoleBinding"
    return ["The operator would create:",
            f"  JobSet {jobset_name(name)}: 1 controller pod, {layout.pods} worker pods ({split} workers; "
            f"{layout.total_workers} in all, {layout.record_processors_per_pod} record processors per pod)",
            f"  ConfigMap {config_map_name(name)}, Secret {curve_secret_name(name)} (CURVE keys), "
            f"{rbac} {jobset_name(name)}"]


def render_file_doc(doc: Obj) -> tuple[list[str], bool]:
    """The lines describing one CR document of a file, and whether it is valid."""
    meta: Obj = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
    kind, name = doc.get("kind", "?"), meta.get("name", "?")
    head = f"{kind}/{name}" + (f" in namespace {meta['namespace']}" if meta.get("namespace") else "")
    problems = validate_resource(doc)
    if problems:
        return [f"{head}: invalid", *(f"  {p}" for p in problems)], False
    spec = decode_spec(doc["spec"], str(kind))
    lines = [f"{head}: valid", *(f"  {line}" for line in _spec_lines(spec))]
    if isinstance(spec, AIPerfJobSpec):
        lines += [f"  {line}" for line in _would_create(str(name), spec)]
    return lines, True


def show_file(path: str, *, fmt: Format, environ: Mapping[str, str] | None = None) -> int:
    """`kube show -f PATH`: each document of the file, its spec's `${VAR}` references (AIPerf's
    `${VAR:default}`) and Jinja2 `variables` resolved, rendered (text) or printed (yaml, json).
    Exit 1 when a document is invalid, 2 when the file cannot be read."""
    try:
        documents = [_rendered(d, os.environ if environ is None else environ)
                     for d in yaml.safe_load_all(Path(path).read_text()) if d is not None]
    except OSError as exc:
        error(f"{path}: cannot read the file: {exc.strerror}")
        return EXIT_USER_ERROR
    except ConfigError as exc:
        error(f"{path}: {exc}")
        return EXIT_USER_ERROR
    except yaml.YAMLError as exc:
        error(f"{path}: not valid YAML: {str(exc).splitlines()[0]}")
        return EXIT_USER_ERROR
    if not documents:
        error(f"{path}: no YAML documents")
        return EXIT_USER_ERROR
    if fmt != "text":
        print(_dump(documents[0] if len(documents) == 1 else documents, fmt), end="")
        return EXIT_OK
    code = EXIT_OK
    for doc in documents:
        lines, valid = render_file_doc(doc) if isinstance(doc, dict) else (["?: not a mapping"], False)
        print("\n".join(lines))
        code = code if valid else EXIT_FAILED
    return code


def _issue(issue: Obj) -> str:
    """`REASON: MESSAGE (pod P, container C) [critical]`."""
    text = ": ".join(str(x) for x in (issue.get("reason"), issue.get("message")) if x)
    where = ", ".join(f"{k} {issue[k]}" for k in ("pod", "container") if issue.get(k))
    return text + (f" ({where})" if where else "") + (" [critical]" if issue.get("critical") else "")


def _progress(status: Obj) -> str | None:
    """`DONE/TOTAL requests (P%), R req/s`; None before the first count."""
    done, total = status.get("requestsCompleted"), status.get("requestsTotal")
    if done is None:
        return None
    progress = f"{done}/{total if total is not None else '?'} requests"
    if status.get("progressPercent") is not None:
        progress += f" ({status['progressPercent']:.0f}%)"
    if status.get("requestsPerSecond") is not None:
        progress += f", {status['requestsPerSecond']:.1f} req/s"
    return progress


def _workers(status: Obj) -> str | None:
    """`READY/TOTAL ready, pods READY/TOTAL`; None before the controller counted them."""
    workers = status.get("workers") or {}
    if not workers:
        return None
    pods = f", pods {workers.get('readyPods', 0)}/{workers['totalPods']}" if workers.get("totalPods") else ""
    return f"{workers.get('ready', 0)}/{workers.get('total', '?')} ready{pods}"


def _phases(status: Obj) -> list[str]:
    """`Phases:` and a line per benchmark phase; nothing before the first."""
    lines = []
    for name, p in (status.get("phases") or {}).items():
        counts = f"{p.get('requestsCompleted', 0)}/{p.get('requestsTotal', '?')} requests"
        if p.get("requestsFailed"):
            counts += f", {p['requestsFailed']} failed"
        lines.append(f"  {name} ({p.get('phaseKind', '?')}): {counts}")
    return ["Phases:", *lines] if lines else []


def _conditions(status: Obj) -> list[str]:
    """`Conditions:` and their table (type, status, reason, message); nothing when none."""
    conditions = status.get("conditions") or []
    if not conditions:
        return []
    rows = [("TYPE", "STATUS", "REASON", "MESSAGE")] + [
        (str(c.get("type", "")), str(c.get("status", "")), str(c.get("reason") or ""), str(c.get("message") or ""))
        for c in conditions]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return ["Conditions:", *("  " + "   ".join([*(r[i].ljust(widths[i]) for i in range(3)), r[3]]).rstrip()
                             for r in rows)]


def render_job(job: Obj) -> list[str]:
    """The lines describing a live AIPerfJob: identity, phase and progress, workers, the startup
    issue, conditions, results, and the spec's gist."""
    meta, status = job.get("metadata") or {}, job.get("status") or {}
    issue, failure = status.get("startupIssue") or {}, status.get("controllerFailure") or {}
    lines = _fields([
        ("Name", meta.get("name")), ("Namespace", meta.get("namespace")), ("UID", meta.get("uid")),
        ("Created", f"{meta.get('creationTimestamp')} ({age(meta.get('creationTimestamp'), now())} ago)"),
        ("Phase", (status.get("phase") or "Pending") + (f" ({status['subPhase']})" if status.get("subPhase") else "")),
        ("Current phase", status.get("currentPhase")), ("Progress", _progress(status)),
        ("Workers", _workers(status)), ("Startup issue", _issue(issue) if issue else None),
        ("Failure", ": ".join(str(x) for x in (failure.get("service"), failure.get("message")) if x)
         if failure else None),
        ("Started", status.get("startTime")), ("Finished", status.get("completionTime")),
        ("Results", status.get("resultsPath")),
    ])
    lines += [*_phases(status), *_conditions(status)]
    try:
        spec = decode_spec(job.get("spec") or {}, JOB_KIND)
    except ConfigError:
        return lines  # a spec this CLI cannot read (a newer CRD): the status is still worth showing
    return [*lines, "Spec:", *(f"  {line}" for line in _spec_lines(spec))]


def show_job(job: Obj, fmt: Format) -> int:
    """`kube show NAME` of an AIPerfJob: rendered, or as stored (yaml, json)."""
    print(_dump(job, fmt) if fmt != "text" else "\n".join(render_job(job)) + "\n", end="")
    return EXIT_OK


def show_jobset(name: str, namespace: str, jobset: Obj | None, fmt: Format) -> int:
    """`kube show NAME` of a direct-mode run (a JobSet, no CR): a one-line summary, or the JobSet
    as stored. Exit 2 when there is none."""
    if jobset is None:
        error(f"no run {name} in namespace {namespace}; `aiperf kube list -n {namespace}` shows the runs")
        return EXIT_USER_ERROR
    if fmt != "text":
        print(_dump(jobset, fmt), end="")
    else:
        print(f"run {name} is a direct-mode run (JobSet {jobset_name(name)}, no AIPerfJob): "
              f"{jobset_state(jobset)}; `aiperf kube logs {name} -n {namespace}` shows its controller")
    return EXIT_OK


def show_sweep(sweep: Obj, fmt: Format) -> int:
    """`kube show NAME --kind sweep`: the AIPerfSweep's phase, runs and results, then its
    spec's gist; or as stored (yaml, json)."""
    if fmt != "text":
        print(_dump(sweep, fmt), end="")
        return EXIT_OK
    meta, status = sweep.get("metadata") or {}, sweep.get("status") or {}
    done = int(status.get("completedRuns") or 0) + int(status.get("failedRuns") or 0)
    lines = _fields([
        ("Name", meta.get("name")), ("Namespace", meta.get("namespace")), ("UID", meta.get("uid")),
        ("Phase", status.get("phase") or "Pending"), ("Runs", f"{done}/{status.get('totalRuns', '?')} done"),
        ("Current child", status.get("currentChild")), ("Results", status.get("resultsPath"))])
    try:
        spec = decode_spec(sweep.get("spec") or {}, SWEEP_KIND)
    except ConfigError:
        spec = None
    print("\n".join([*lines, *(["Spec:", *(f"  {line}" for line in _spec_lines(spec))] if spec else [])]))
    return EXIT_OK
