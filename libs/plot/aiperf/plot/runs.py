"""What `aiperf plot` reads: the export files of runs and sweeps, found from the folders given.

A *run folder* holds `profile_export_aiperf.json` (the summary) and/or `profile_export.jsonl`
(one line per request). A *sweep folder* is what `aiperf profile` writes for a sweep or for
`--num-profile-runs`: `profile_runs/trial_NNNN[/<label>]/` run folders and, for a sweep,
`aggregate/sweep_aggregate/profile_export_aiperf_sweep.json`. A folder that is neither is
searched one level down. Pure file reading: no plotting library is imported here.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

SUMMARY = "profile_export_aiperf.json"
RECORDS = "profile_export.jsonl"
PROFILE_RUNS = "profile_runs"
SWEEP_AGGREGATE = Path("aggregate", "sweep_aggregate", "profile_export_aiperf_sweep.json")
PROFILING = "profiling"


class PlotInputError(ValueError):
    """A folder given to `aiperf plot` that cannot be plotted; the message is one line naming it."""


@dataclass(frozen=True, kw_only=True)
class RequestSpan:
    """One request of the profiling phase, in ns since the epoch: sent, first token (None
    without streaming or when none came), finished; `failed` when it ended in an error."""

    start_ns: int
    first_token_ns: int | None
    end_ns: int
    failed: bool


@dataclass(frozen=True, kw_only=True)
class RunData:
    """One run (or the trials of one sweep variation, pooled) as the plots need it.

    `ttft_ms`, `itl_ms`, `latency_ms`: per successful profiling request (empty when the
    export has none, e.g. TTFT without streaming). `spans`: every profiling request, in start
    order (empty without `profile_export.jsonl`). `summary`: the parsed summary of the first
    trial (None when there is none)."""

    label: str
    path: Path
    summary: Mapping[str, Any] | None
    ttft_ms: list[float] = field(default_factory=list)
    itl_ms: list[float] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)
    spans: list[RequestSpan] = field(default_factory=list)

    def stat(self, tag: str, stat: str) -> float | None:
        """`summary[tag][stat]` when it is a finite number, else None."""
        value = (self.summary or {}).get(tag, {})
        got = value.get(stat) if isinstance(value, Mapping) else None
        return float(got) if isinstance(got, int | float) and math.isfinite(got) else None


@dataclass(frozen=True, kw_only=True)
class SweepPoint:
    """One variation of a sweep: its parameter values and `metrics` as the sweep aggregate has
    them (tag -> stat -> {mean, ci_low, ci_high, ...} over the trials)."""

    label: str
    parameters: Mapping[str, float]
    metrics: Mapping[str, Mapping[str, Mapping[str, float | None]]]

    def value(self, tag: str, stat: str, part: str = "mean") -> float | None:
        """The metric's `part` (mean, ci_low, ci_high) when it is a finite number, else None."""
        got = self.metrics.get(tag, {}).get(stat, {}).get(part)
        return float(got) if isinstance(got, int | float) and math.isfinite(got) else None


@dataclass(frozen=True, kw_only=True)
class SweepData:
    """A sweep: its label (the folder's name), the parameters it varies and one point per
    variation, in plan order."""

    label: str
    path: Path
    parameters: list[str]
    points: list[SweepPoint]


@dataclass(frozen=True, kw_only=True)
class PlotInputs:
    """Everything found in the folders given: runs to compare and sweeps."""

    runs: list[RunData]
    sweeps: list[SweepData]


def is_run_dir(path: Path) -> bool:
    """Whether `path` holds a run's exports."""
    return (path / SUMMARY).is_file() or (path / RECORDS).is_file()


def is_sweep_dir(path: Path) -> bool:
    """Whether `path` holds a multi-run or sweep layout."""
    return (path / PROFILE_RUNS).is_dir()


def load_inputs(paths: Sequence[str | Path]) -> PlotInputs:
    """The runs and sweeps under `paths` (each a run folder, a sweep folder or a folder holding
    such folders one level down). Labels are folder names, made unique with their parent's
    name when two collide. Raises `PlotInputError` for a missing folder, a folder with no
    exports, or an export that cannot be read."""
    if not paths:
        raise PlotInputError("no folder given: name a run's artifact folder")
    runs: list[tuple[str, str, list[Path]]] = []  # (label, its context for clashes, folders)
    sweeps: list[SweepData] = []
    for given in paths:
        path = Path(given)
        if not path.is_dir():
            raise PlotInputError(f"{given}: no such folder")
        found = _found_in(path)
        if not found:
            raise PlotInputError(f"{given}: no profile exports ({SUMMARY} or {RECORDS}) in it "
                                 f"or its subfolders; is it an --artifact-dir of `aiperf profile`?")
        for item in found:
            if is_sweep_dir(item):
                groups = _sweep_groups(item)
                if not groups:
                    raise PlotInputError(f"{item}: {PROFILE_RUNS}/ holds no run with exports")
                runs += [(label, item.name, folders) for label, folders in groups]
                if (sweep := _load_sweep(item)) is not None:
                    sweeps.append(sweep)
            else:
                runs.append((item.name, item.resolve().parent.name, [item]))
    labels = _unique_labels([(label, context) for label, context, _ in runs])
    return PlotInputs(runs=[_load_run(label, folders) for label, (_, _, folders) in zip(labels, runs, strict=True)],
                      sweeps=sweeps)


def _found_in(path: Path) -> list[Path]:
    if is_sweep_dir(path) or is_run_dir(path):
        return [path]
    children = sorted(p for p in path.iterdir() if p.is_dir())
    return [c for c in children if is_sweep_dir(c) or is_run_dir(c)]


def _sweep_groups(path: Path) -> list[tuple[str, list[Path]]]:
    """(label, run folders) per variation in trial-1 order, the trials of a variation pooled;
    without a sweep (repeated runs only) one group named after the folder."""
    groups: dict[str, list[Path]] = {}
    for trial in sorted((path / PROFILE_RUNS).glob("trial_*")):
        if not trial.is_dir():
            continue
        if is_run_dir(trial):
            groups.setdefault(path.name, []).append(trial)
            continue
        for variation in sorted(trial.iterdir(), key=_natural):
            if variation.is_dir() and is_run_dir(variation):
                groups.setdefault(variation.name, []).append(variation)
    return list(groups.items())


def _natural(path: Path) -> tuple[Any, ...]:
    """`concurrency_2` before `concurrency_16`: digit runs compare as numbers."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name))


def _unique_labels(items: Iterable[tuple[str, str]]) -> list[str]:
    """Each (label, context): the label, or `context/label` when another item has the same."""
    items = list(items)
    names = [label for label, _ in items]
    return [f"{context}/{label}" if names.count(label) > 1 else label for label, context in items]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise PlotInputError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise PlotInputError(f"{path}: not valid JSON ({exc})") from None


def _load_run(label: str, folders: list[Path]) -> RunData:
    summary = None
    if (folders[0] / SUMMARY).is_file():
        summary = _read_json(folders[0] / SUMMARY)
        if not isinstance(summary, dict):
            raise PlotInputError(f"{folders[0] / SUMMARY}: not an AIPerf summary (a JSON object)")
    ttft: list[float] = []
    itl: list[float] = []
    latency: list[float] = []
    spans: list[RequestSpan] = []
    for folder in folders:
        if (folder / RECORDS).is_file():
            _read_records(folder / RECORDS, ttft=ttft, itl=itl, latency=latency, spans=spans)
    spans.sort(key=lambda s: s.start_ns)
    return RunData(label=label, path=folders[0], summary=summary, ttft_ms=ttft, itl_ms=itl,
                   latency_ms=latency, spans=spans)


def _metric(metrics: Mapping[str, Any], tag: str) -> float | None:
    entry = metrics.get(tag)
    value = entry.get("value") if isinstance(entry, Mapping) else None
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _read_records(path: Path, *, ttft: list[float], itl: list[float], latency: list[float],
                  spans: list[RequestSpan]) -> None:
    """Append the profiling requests of one `profile_export.jsonl`; a cut last line (a run
    still writing) is skipped, any other unreadable line raises `PlotInputError`."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise PlotInputError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            if number == len(lines):
                break
            raise PlotInputError(f"{path}:{number}: not a JSON line") from None
        if not isinstance(record, dict):
            raise PlotInputError(f"{path}:{number}: not a record (a JSON object)")
        meta, metrics = record.get("metadata") or {}, record.get("metrics") or {}
        if meta.get("benchmark_phase", PROFILING) != PROFILING:
            continue
        failed = record.get("error") is not None
        first_ms = _metric(metrics, "time_to_first_token")
        if not failed:
            for values, tag in ((ttft, "time_to_first_token"), (itl, "inter_token_latency"),
                                (latency, "request_latency")):
                if (value := _metric(metrics, tag)) is not None:
                    values.append(value)
        start, end = meta.get("request_start_ns"), meta.get("request_end_ns")
        if isinstance(start, int) and isinstance(end, int) and end >= start:
            first = start + round(first_ms * 1e6) if first_ms is not None and not failed else None
            spans.append(RequestSpan(start_ns=start, first_token_ns=first, end_ns=end, failed=failed))


def _load_sweep(path: Path) -> SweepData | None:
    """The sweep aggregate of `path`, None when there is none (repeated runs without a sweep,
    or a sweep that did not finish)."""
    file = path / SWEEP_AGGREGATE
    if not file.is_file():
        return None
    doc = _read_json(file)
    try:
        points = [SweepPoint(label=str(c["label"]),
                             parameters={k: float(v) for k, v in c.get("parameters", {}).items()},
                             metrics=c.get("metrics", {}))
                  for c in doc["per_combination_metrics"]]
        parameters = [str(p) for p in doc.get("parameters", [])]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PlotInputError(f"{file}: not a sweep aggregate ({type(exc).__name__}: {exc})") from None
    return SweepData(label=path.name, path=path, parameters=parameters, points=points)
