"""Time-sliced results (AIPerf 0.13's `artifacts.slice_duration`, `--slice-duration`):
`profile_export_aiperf_timeslices.json` and `.csv`.

The profiling phase's records are cut into windows of `slice_duration` seconds by when each
request started, from the first start on (AIPerf's grid: `[first + k*d, first + (k+1)*d)`); the
last window ends at the last request's end and is marked `is_complete: false` when shorter than
`d`. Windows without a request are left out (the list stays dense, as AIPerf's). Each window's
metrics are the summary's (`aiperf.metrics.aggregate.Aggregator`) of the records in it, with the
window's length as the benchmark duration of its throughputs.

JSON: `{"timeslices": [{"start_ns", "end_ns", ["is_complete": false], <tag>: {unit, stats}}],
"input_config": {...}}` (the metrics in the summary's order). CSV (tidy):
`Timeslice,Start_NS,End_NS,Metric,Unit,Stat,Value`, one row per set stat, metrics sorted by tag,
stats in AIPerf's order; numbers with two decimals, integers bare.

`TimesliceRecords` keeps the profiling records (only when slices are asked for: one Python
object per request, as AIPerf keeps one row per request).
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from aiperf.messages import MetricRecord, Phase
from aiperf.metrics.aggregate import STAT_KEYS, Aggregator, OslMismatchThresholds, Summary
from aiperf.metrics.atomic import write_atomic
from aiperf.metrics.summary_json import metric_json

JSON_NAME = "profile_export_aiperf_timeslices.json"
CSV_NAME = "profile_export_aiperf_timeslices.csv"


@dataclass(frozen=True, slots=True)
class Timeslice:
    """One window: its bounds (wall clock, ns), whether it lasted the full slice, its summary."""

    start_ns: int
    end_ns: int
    is_complete: bool
    summary: Summary


class TimesliceRecords:
    """The profiling records of a run, for `slices` once it ended (see the module doc)."""

    def __init__(self, slice_duration_s: float) -> None:
        if not slice_duration_s > 0:
            raise ValueError("slice_duration must be > 0")
        self.slice_ns = int(slice_duration_s * 1e9)
        self._records: list[MetricRecord] = []

    def add_batch(self, records: Sequence[MetricRecord]) -> None:
        """Keep the profiling records of `records` that have a start time."""
        self._records.extend(r for r in records if r.phase == Phase.PROFILING and r.start_wall_ns)

    def slices(self, *, goodput: Mapping[str, float] | None = None,
               osl_mismatch: OslMismatchThresholds | None = None) -> list[Timeslice]:
        """The windows that hold a request, in time order."""
        if not self._records:
            return []
        first = min(r.start_wall_ns for r in self._records)
        last = max(max(r.start_wall_ns, r.end_wall_ns) for r in self._records)
        d = self.slice_ns
        count = (last - first) // d + 1
        bins: list[list[MetricRecord]] = [[] for _ in range(count)]
        for record in self._records:
            bins[min((record.start_wall_ns - first) // d, count - 1)].append(record)
        out = []
        for index, members in enumerate(bins):
            if not members:
                continue
            start, end = first + index * d, first + (index + 1) * d
            complete = end <= last
            end = end if complete else last
            aggregator = Aggregator()
            aggregator.add_batch(sorted(members, key=lambda r: r.start_wall_ns))
            summary = aggregator.summary(benchmark_duration_s=max(end - start, 1) / 1e9,
                                         goodput=dict(goodput or {}), osl_mismatch=osl_mismatch)
            out.append(Timeslice(start_ns=start, end_ns=end, is_complete=complete, summary=summary))
        return out


def timeslices_document(slices: Sequence[Timeslice], input_config: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON export (see the module doc)."""
    items = []
    for ts in slices:
        item: dict[str, Any] = {"start_ns": ts.start_ns, "end_ns": ts.end_ns}
        if not ts.is_complete:
            item["is_complete"] = False
        for tag, stats in ts.summary.metrics.items():
            item[tag] = metric_json(stats)
        items.append(item)
    return {"timeslices": items, "input_config": dict(input_config)}


def _number(value: float | int) -> str:
    return str(value) if isinstance(value, int) else f"{value:.2f}"


def timeslices_csv(slices: Sequence[Timeslice]) -> str:
    """The CSV export (see the module doc; `\\r\\n` line ends, as Python's csv writer emits)."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["Timeslice", "Start_NS", "End_NS", "Metric", "Unit", "Stat", "Value"])
    for index, ts in enumerate(slices):
        for _, stats in sorted(ts.summary.metrics.items()):
            for key in STAT_KEYS:
                value = stats.stat(key)
                if value is not None:
                    if key == "avg" and stats.tag.endswith("_count") and float(value).is_integer():
                        value = int(value)
                    writer.writerow([index, ts.start_ns, ts.end_ns, stats.header, stats.unit, key, _number(value)])
    return buf.getvalue()


def write_timeslices(directory: str | os.PathLike[str], slices: Sequence[Timeslice],
                     input_config: Mapping[str, Any]) -> list[str]:
    """Write both files into `directory` (atomically); returns their names (none without a
    slice). Raises `OSError` when a file cannot be written."""
    if not slices:
        return []
    doc = timeslices_document(slices, input_config)
    data = orjson.dumps(doc, default=str, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)
    write_atomic(Path(directory) / JSON_NAME, data + b"\n")
    write_atomic(Path(directory) / CSV_NAME, timeslices_csv(slices).encode())
    return [JSON_NAME, CSV_NAME]
