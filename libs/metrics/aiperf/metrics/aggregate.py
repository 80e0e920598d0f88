"""Exact aggregation of metric records into a run summary.

Every value is kept (no sketches), so percentiles are exact: numpy's default ("linear")
method. `std` is the population standard deviation (``np.std``, ddof=0), as AIPerf 0.13.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from aiperf.messages import AggregateShard, ColumnBytes, ErrorDetails, MetricRecord, Phase
from aiperf.metrics.catalog import RECORD_METRICS, SPECS, SUMMARY_ORDER, spec_of
from aiperf.metrics.columns import Column, FileArray
from aiperf.metrics.exact import Blocks, block_stats
from aiperf.metrics.sweepline import Timeline, sweep_metrics
from aiperf.metrics.weighted import TimeWeightedStats

PERCENTILES: tuple[int, ...] = (1, 5, 10, 25, 50, 75, 90, 95, 99)
STAT_KEYS: tuple[str, ...] = ("avg", "min", "max", "sum", *(f"p{p}" for p in PERCENTILES), "std")
"""AIPerf's stat keys, in its CSV column order (`count` is extra, record metrics only)."""


@dataclass(frozen=True, slots=True)
class MetricStats:
    """Statistics of one metric in display units.

    Record metrics fill every stat and `count`; derived scalars (throughputs, counts) only
    `avg`, the others staying None; time-weighted (sweep) metrics `avg`, `min`, `max`, `p50`,
    `p90`, `p95`, `p99` and `std`.
    """

    tag: str
    header: str
    unit: str
    avg: float
    min: float | None = None
    max: float | None = None
    sum: float | None = None
    p1: float | None = None
    p5: float | None = None
    p10: float | None = None
    p25: float | None = None
    p50: float | None = None
    p75: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    std: float | None = None
    count: int | None = None

    @property
    def is_distribution(self) -> bool:
        """True for a record metric (one value per request: `count` present)."""
        return self.count is not None

    @property
    def has_percentiles(self) -> bool:
        """True for a record or time-weighted metric, False for a derived scalar."""
        return self.p50 is not None

    def stat(self, key: str) -> float | int | None:
        """Return one stat by AIPerf key (``"avg"``, ``"p99"``, ``"count"``...)."""
        value: float | int | None = getattr(self, key)
        return value

    @classmethod
    def scalar(cls, tag: str, value: float) -> MetricStats:
        """A derived metric: only `avg` is set."""
        spec = spec_of(tag)
        return cls(tag=tag, header=spec.header, unit=spec.unit, avg=float(value))

    @classmethod
    def time_weighted(cls, tag: str, tws: TimeWeightedStats) -> MetricStats:
        """A sweep metric (values already in display units)."""
        spec = spec_of(tag)
        return cls(tag=tag, header=spec.header, unit=spec.unit, avg=tws.avg, min=tws.min, max=tws.max,
                   p50=tws.p50, p90=tws.p90, p95=tws.p95, p99=tws.p99, std=tws.std)

    @classmethod
    def of_values(cls, tag: str, values: np.ndarray) -> MetricStats:
        """Stats of `values` (display units, non-empty) as numpy computes them."""
        spec = spec_of(tag)
        pct = np.percentile(values, PERCENTILES)
        return cls(
            tag=tag, header=spec.header, unit=spec.unit,
            avg=float(np.mean(values)), min=float(np.min(values)), max=float(np.max(values)),
            sum=float(np.sum(values)),
            p1=float(pct[0]), p5=float(pct[1]), p10=float(pct[2]), p25=float(pct[3]), p50=float(pct[4]),
            p75=float(pct[5]), p90=float(pct[6]), p95=float(pct[7]), p99=float(pct[8]),
            std=float(np.std(values)), count=int(values.size),
        )

    @classmethod
    def of_blocks(cls, tag: str, blocks: Blocks, scale: float) -> MetricStats | None:
        """`of_values` of ``concatenate(blocks()).astype(float64) * scale`` without its NaNs,
        the same floats bit for bit, from one block at a time (`aiperf.metrics.exact`); None
        when no value is left."""
        got = block_stats(blocks, scale, PERCENTILES)
        if got is None:
            return None
        spec = spec_of(tag)
        p = got.percentiles
        return cls(tag=tag, header=spec.header, unit=spec.unit, avg=got.avg, min=got.min, max=got.max, sum=got.sum,
                   p1=p[0], p5=p[1], p10=p[2], p25=p[3], p50=p[4], p75=p[5], p90=p[6], p95=p[7], p99=p[8],
                   std=got.std, count=got.count)

@dataclass(frozen=True, slots=True)
class Summary:
    """A run's results: AIPerf metrics in AIPerf's key order, our extra metrics apart.

    `errors` groups failed requests by identical `ErrorDetails`, most frequent first.
    """

    metrics: dict[str, MetricStats]
    extras: dict[str, MetricStats] = field(default_factory=dict)
    errors: list[tuple[ErrorDetails, int]] = field(default_factory=list)
    benchmark_duration_s: float = 0.0
    request_count: int = 0
    error_request_count: int = 0
    cancelled_request_count: int = 0
    good_request_count: int | None = None

    def get(self, tag: str) -> MetricStats | None:
        """Stats of `tag` from either the AIPerf metrics or our extras."""
        return self.metrics.get(tag) or self.extras.get(tag)


@dataclass(frozen=True, slots=True)
class OslMismatchThresholds:
    """When a request's output length counts as a mismatch (AIPerf's
    `AIPERF_METRICS_OSL_MISMATCH_PCT_THRESHOLD` / `..._MAX_TOKEN_THRESHOLD`): when
    ``|osl - requested| > min(requested * pct / 100, max_tokens)``."""

    pct: float = 5.0
    max_tokens: int = 50


class _Rows:
    """Per-request phase boundaries for the sweep metrics (wall-clock ns), one row per
    profiling request that was sent: successes, errors and cancellations alike.

    `icl_count` says how many values of the aggregator's flat `inter_chunk_latency` column a
    row owns; a row without both timestamps is kept (invalid) so that the rows after it still
    own the right values.
    """

    __slots__ = ("start", "first", "end", "isl", "osl", "icl_count")

    def __init__(self) -> None:
        self.start = array("q")
        self.first = array("q")
        self.end = array("q")
        self.isl = array("d")
        self.osl = array("d")
        self.icl_count = array("q")

    def add(self, record: MetricRecord, icl: int) -> None:
        """One row for `record`, which owns `icl` ICL values (see `add_many`)."""
        self.add_many((record,), (icl,))

    def add_many(self, records: Sequence[MetricRecord], icl_counts: Sequence[int]) -> None:
        """A row per record, in order; record i owns `icl_counts[i]` ICL values. A record
        without a valid start and end that owns none adds no row."""
        starts, firsts, ends = self.start.append, self.first.append, self.end.append
        isls, osls, icls = self.isl.append, self.osl.append, self.icl_count.append
        for record, icl in zip(records, icl_counts, strict=True):
            start, end = record.start_wall_ns, record.end_wall_ns
            valid = bool(start) and bool(end) and end >= start
            if not valid and not icl:
                continue
            metrics = record.metrics
            ttft = metrics.get("time_to_first_token")
            isl = metrics.get("input_sequence_length")
            osl = metrics.get("output_sequence_length")
            starts(start if valid else -1)
            ends(end if valid else -1)
            firsts(start + int(ttft) if valid and isinstance(ttft, int | float) else -1)
            isls(float(isl) if isinstance(isl, int | float) else math.nan)
            osls(float(osl) if isinstance(osl, int | float) else math.nan)
            icls(icl)

    def shard_fields(self) -> dict[str, bytes]:
        """The six columns as raw bytes, keyed `row_<name>` (`AggregateShard`'s fields)."""
        return {f"row_{name}": getattr(self, name).tobytes() for name in self.__slots__}

    def merge_fields(self, shard: AggregateShard) -> None:
        """Append the rows of `shard` (checked by `check_shard`) after these."""
        for name in self.__slots__:
            getattr(self, name).frombytes(getattr(shard, f"row_{name}"))

    def timeline(self, icl: np.ndarray | FileArray) -> Timeline:
        start = np.asarray(self.start, np.int64)
        valid = start >= 0
        counts = np.asarray(self.icl_count, np.int64)
        flat = icl  # the gaps as stored (uint32 or float64): sweepline reads them blockwise
        if flat.size == int(counts.sum()):
            if not valid.all():  # rare (a record without its times that owns gaps): read in memory
                flat = flat[np.flatnonzero(np.repeat(valid, counts))]
        else:  # cannot happen: every ICL value came with its row
            flat, counts = np.zeros(0, np.int64), np.zeros_like(counts)
        start = start[valid]
        base = int(start.min()) if start.size else 0  # small integers: exact in float64 too
        first = np.asarray(self.first, np.int64)[valid]
        return Timeline(start=start - base, first=np.where(first >= 0, first - base, 0), has_first=first >= 0,
                        end=np.asarray(self.end, np.int64)[valid] - base,
                        isl=np.asarray(self.isl, np.float64)[valid], osl=np.asarray(self.osl, np.float64)[valid],
                        icl=flat, icl_counts=counts[valid])


class Aggregator:
    """Collects `MetricRecord`s of the profiling phase; `summary` computes exact statistics.

    Warmup records are counted (`warmup_count`) but never enter the statistics. A record with
    `cancelled` set counts only as cancelled; one with `error` as an error (its `error_isl`
    is kept). Every profiling request that was sent also enters the time-weighted (sweep)
    metrics with its start, first token and end. Memory: one float per metric value plus six
    numbers per request, in typed arrays (`Column`: 4 or 8 bytes per value, no Python object
    per value). Not thread-safe; `add` never blocks.

    With `spill` (a directory), the columns move their values to unnamed temporary files there
    a block at a time (`Column`), and the summary reads them back block by block: memory holds
    a block per column and the six numbers per request (the sweep metrics read the chunk gaps
    back whole, 4 bytes each). `close` removes the files (the process's end does too).
    """

    def __init__(self, spill: Path | None = None) -> None:
        self._spill = spill
        self._n = 0
        self._scalars: dict[str, Column] = {}
        self._lists: dict[str, Column] = {}
        self._error_isl = array("d")
        self._errors: Counter[ErrorDetails] = Counter()
        self._cancelled = 0
        self._warmup = 0
        self._min_start_wall = math.inf
        self._max_end_wall = -math.inf
        self._rows = _Rows()

    @property
    def warmup_count(self) -> int:
        """Warmup records seen (excluded from the results)."""
        return self._warmup

    @property
    def record_count(self) -> int:
        """Profiling records added: successes + errors + cancelled."""
        return self._n + sum(self._errors.values()) + self._cancelled

    def add(self, record: MetricRecord) -> None:
        """Take one record; returns at once (values are appended, not summarized)."""
        if record.phase != Phase.PROFILING:
            self._warmup += 1
            return
        if record.start_wall_ns:
            self._min_start_wall = min(self._min_start_wall, record.start_wall_ns)
        if record.end_wall_ns:
            self._max_end_wall = max(self._max_end_wall, record.end_wall_ns)
        if record.cancelled or record.error is not None:
            self._rows.add(record, 0)
        if record.cancelled:
            self._cancelled += 1
            return
        if record.error is not None:
            self._errors[record.error] += 1
            isl = record.metrics.get("error_isl")
            if isinstance(isl, int | float):
                self._error_isl.append(float(isl))
            return
        icl = record.metrics.get("inter_chunk_latency")
        self._rows.add(record, len(icl) if isinstance(icl, list) else 0)
        n = self._n
        for tag, value in record.metrics.items():
            if isinstance(value, list):
                self._extend_list(tag, (value,))
            else:
                self._extend_scalar(tag, n, (value,))
        self._n = n + 1

    def shard(self) -> AggregateShard:
        """The whole state as a message that can travel (each column as raw bytes) for `merge`."""
        def col(c: Column) -> ColumnBytes:
            data = c.data
            return ColumnBytes(typecode=data.typecode, data=data.tobytes())

        return AggregateShard(
            success_count=self._n, scalars={t: col(c) for t, c in self._scalars.items()},
            lists={t: col(c) for t, c in self._lists.items()}, **self._rows.shard_fields(),
            error_isl=self._error_isl.tobytes(), errors=list(self._errors.items()),
            cancelled=self._cancelled, warmup=self._warmup,
            min_start_wall_ns=int(self._min_start_wall) if math.isfinite(self._min_start_wall) else None,
            max_end_wall_ns=int(self._max_end_wall) if math.isfinite(self._max_end_wall) else None)

    def merge(self, shard: AggregateShard) -> None:
        """Take the records that `shard` (another aggregator's `shard()`) stands for after the
        ones taken so far, leaving exactly the state that `add` on each of its records in turn
        leaves: the same column values and widths, rows, counts, error counter and its order.
        So merging the shards of consecutive parts of a record stream, in order, gives the very
        summary of one aggregator fed the whole stream, bit for bit; in any other order, every
        order statistic (count, min, max, percentiles, the counts and integer totals) is still
        the same bit for bit, and the float sums (avg, sum, std, the time-weighted curves at
        instants shared by three or more events) may differ in the last bits, as they do today
        with the arrival order of records from several record-processors (and errors of equal count
        may be listed in another order). Costs per column
        (a buffer copy each), not per value. Raises `ValueError` for a malformed shard (a column
        of an unknown type or cut bytes)."""
        check_shard(shard)
        self._rows.merge_fields(shard)
        n = self._n
        for tag, cb in shard.scalars.items():
            col = self._scalars.get(tag)
            if col is None:
                col = self._scalars[tag] = Column(self._spill)
            if len(col) < n:
                col.pad(n)
            col.extend_raw(cb.typecode, cb.data)
        for tag, cb in shard.lists.items():
            lst = self._lists.get(tag)
            if lst is None:
                lst = self._lists[tag] = Column(self._spill)
            lst.extend_raw(cb.typecode, cb.data)
        self._error_isl.frombytes(shard.error_isl)
        for error, count in shard.errors:
            self._errors[error] += count
        self._cancelled += shard.cancelled
        self._warmup += shard.warmup
        self._n = n + shard.success_count
        if shard.min_start_wall_ns is not None:
            self._min_start_wall = min(self._min_start_wall, shard.min_start_wall_ns)
        if shard.max_end_wall_ns is not None:
            self._max_end_wall = max(self._max_end_wall, shard.max_end_wall_ns)

    def add_batch(self, records: Sequence[MetricRecord]) -> None:
        """Take `records` in order, leaving exactly the state that `add` on each in turn leaves
        (the same column values and widths, rows, counts, error order), at a fraction of the
        cost per record: consecutive successful profiling records whose metric tags are the
        same, in the same order, are appended tag by tag (one column extend per tag per run);
        any other record goes through `add`."""
        run: list[MetricRecord] = []
        tags: tuple[str, ...] = ()
        for record in records:
            if record.phase != Phase.PROFILING or record.cancelled or record.error is not None:
                if run:
                    self._add_run(run, tags)
                    run = []
                self.add(record)
                continue
            keys = tuple(record.metrics)
            if run and keys != tags:
                self._add_run(run, tags)
                run = []
            tags = keys
            run.append(record)
        if run:
            self._add_run(run, tags)

    def _add_run(self, run: list[MetricRecord], tags: tuple[str, ...]) -> None:
        """`add` for successful profiling records whose `metrics` all have the keys `tags`, in
        that order. Each tag's column sees the same operations as under `add` (its columns are
        independent of the other tags'), only grouped."""
        starts = [r.start_wall_ns for r in run]
        ends = [r.end_wall_ns for r in run]
        self._min_start_wall = min(self._min_start_wall, min(filter(None, starts), default=math.inf))
        self._max_end_wall = max(self._max_end_wall, max(filter(None, ends), default=-math.inf))
        n = self._n
        icl_counts = [0] * len(run)
        for tag, values in zip(tags, zip(*(r.metrics.values() for r in run), strict=True), strict=True):
            kinds = [issubclass(k, list) for k in set(map(type, values))]  # isinstance, once per type
            if not any(kinds):
                self._extend_scalar(tag, n, values)
            elif all(kinds):
                self._extend_list(tag, values)
                if tag == "inter_chunk_latency":
                    icl_counts = [len(v) for v in values]
            else:  # a tag both list- and scalar-valued: no producer does this; kept exact anyway
                self._extend_mixed(tag, n, values)
                if tag == "inter_chunk_latency":
                    icl_counts = [len(v) if isinstance(v, list) else 0 for v in values]
        self._rows.add_many(run, icl_counts)
        self._n = n + len(run)

    def _extend_scalar(self, tag: str, n: int, values: Sequence[float]) -> None:
        """Values of success numbers n, n+1, ... of scalar metric `tag`."""
        col = self._scalars.get(tag)
        if col is None:
            col = self._scalars[tag] = Column(self._spill)
        if len(col) < n:
            col.pad(n)
        col.extend(values)

    def _extend_list(self, tag: str, values: Sequence[list[float]]) -> None:
        """The lists of list metric `tag` of consecutive successes, flattened in order."""
        lst = self._lists.get(tag)
        if lst is None:
            lst = self._lists[tag] = Column(self._spill)
        for value in values:
            lst.extend(value)

    def _extend_mixed(self, tag: str, n: int, values: Sequence[float | list[float]]) -> None:
        """`tag`'s values of success numbers n, n+1, ... one by one, as `add` takes them."""
        for i, value in enumerate(values):
            if isinstance(value, list):
                self._extend_list(tag, [value])
            else:
                self._extend_scalar(tag, n + i, [value])

    def close(self) -> None:
        """Remove the spill files (with `spill`); the aggregator is empty of values after it."""
        for col in (*self._scalars.values(), *self._lists.values()):
            col.close()
        self._scalars.clear()
        self._lists.clear()

    def observed_duration_s(self) -> float:
        """AIPerf's benchmark_duration from the records: last end - first start (wall clock), s."""
        if self._max_end_wall < self._min_start_wall:
            return 0.0
        return float(self._max_end_wall - self._min_start_wall) / 1e9

    def column(self, tag: str) -> np.ndarray:
        """Values of `tag` in display units over the successful records, NaN where absent."""
        scale = spec_of(tag).scale
        if tag in self._lists:
            return self._lists[tag].values() * scale
        arr = np.full(self._n, np.nan)
        col = self._scalars.get(tag)
        if col is not None:
            arr[: len(col)] = col.values()
        return arr * scale

    def summary(self, *, benchmark_duration_s: float, goodput: dict[str, float] | None = None,
                osl_mismatch: OslMismatchThresholds | None = None) -> Summary:
        """Compute the summary. `goodput` maps metric tags to SLO thresholds in display units.

        A successful request is good when every thresholded metric is present and satisfies
        it (<= for lower-is-better, >= for larger-is-better metrics: DistServe / AIPerf).
        `osl_mismatch` (default: AIPerf's 5% / 50 tokens) decides `osl_mismatch_count`. The
        sweep metrics are time-weighted over first start .. last end of the profiling requests.
        Raises `ValueError` for a goodput tag that is not a per-request metric.
        """
        stats: dict[str, MetricStats] = {}
        for tag in self._scalars:  # a value per request: numpy on a float64 copy, one column at a time
            if spec_of(tag).internal:
                continue
            values = self.column(tag)
            values = values[~np.isnan(values)]
            if values.size:
                stats[tag] = MetricStats.of_values(tag, values)
        for tag, lst in self._lists.items():  # a value per chunk: the same floats, block by block
            if not spec_of(tag).internal and (got := MetricStats.of_blocks(tag, lst.blocks, spec_of(tag).scale)):
                stats[tag] = got
        if self._error_isl:
            stats["error_isl"] = MetricStats.of_values("error_isl", np.asarray(self._error_isl))
        errors = sum(self._errors.values())
        duration = benchmark_duration_s
        derived = self._derived(duration, errors)
        good: int | None = None
        if goodput:
            good = self._good_count(goodput)
            derived["good_request_count"] = good
            derived["goodput"] = good / duration if duration > 0 else 0.0
        if (mismatches := self._osl_mismatches(osl_mismatch or OslMismatchThresholds())) is not None:
            derived["osl_mismatch_count"] = mismatches
        for tag, value in derived.items():
            stats[tag] = MetricStats.scalar(tag, value)
        icl = self._lists.get("inter_chunk_latency")
        flat = icl.readable() if icl is not None else np.zeros(0)  # as stored (uint32 or float64), read on demand
        for tag, tws in sweep_metrics(self._rows.timeline(flat), spill=self._spill).items():
            stats[tag] = MetricStats.time_weighted(tag, tws)
        ordered = {t: stats.pop(t) for t in SUMMARY_ORDER if t in stats}
        ordered.update(stats)
        ours = {t: s for t, s in ordered.items() if SPECS.get(t) is not None and SPECS[t].ours}
        aiperf = {t: s for t, s in ordered.items() if t not in ours}
        return Summary(
            metrics=aiperf, extras=ours, errors=self._errors.most_common(),
            benchmark_duration_s=duration, request_count=self._n, error_request_count=errors,
            cancelled_request_count=self._cancelled, good_request_count=good,
        )

    def _derived(self, duration: float, errors: int) -> dict[str, float]:
        def total(tag: str) -> float:
            col = self._scalars.get(tag)
            return float(np.nansum(col.values())) if col is not None and len(col) else 0.0

        total_osl, total_isl = total("output_sequence_length"), total("input_sequence_length")
        out: dict[str, float] = {
            "request_count": self._n,
            "completed_request_count": self._n + errors,
            "benchmark_duration": duration,
            "total_isl": total_isl,
            "total_osl": total_osl,
            "total_output_tokens": total("output_token_count"),
        }
        if duration > 0:
            out["request_throughput"] = self._n / duration
            out["output_token_throughput"] = total_osl / duration
            out["input_token_throughput"] = total_isl / duration
            out["total_token_throughput"] = (total_isl + total_osl) / duration
        if "reasoning_token_count" in self._scalars:
            out["total_reasoning_tokens"] = total("reasoning_token_count")
        if errors:
            out["error_request_count"] = errors
            out["total_error_isl"] = float(sum(self._error_isl))
        if self._n + errors:
            out["request_error_rate"] = 100.0 * errors / (self._n + errors)
        if self._cancelled:
            out["cancelled_request_count"] = self._cancelled
        for usage in ("prompt", "completion", "total", "reasoning"):
            if f"usage_{usage}_tokens" in self._scalars:
                out[f"total_usage_{usage}_tokens"] = total(f"usage_{usage}_tokens")
        return out

    def _osl_mismatches(self, limits: OslMismatchThresholds) -> int | None:
        """Successful requests whose output length missed the requested one by more than
        ``min(requested * pct / 100, max_tokens)``; None when no request asked for a length."""
        if "requested_osl" not in self._scalars or "output_sequence_length" not in self._scalars:
            return None
        requested, actual = self.column("requested_osl"), self.column("output_sequence_length")
        known = ~np.isnan(requested) & ~np.isnan(actual)
        if not known.any():
            return None
        allowed = np.minimum(requested[known] * (limits.pct / 100.0), float(limits.max_tokens))
        return int(np.count_nonzero(np.abs(actual[known] - requested[known]) > allowed))

    def _good_count(self, slos: dict[str, float]) -> int:
        good = np.ones(self._n, dtype=bool)
        for tag, threshold in slos.items():
            spec = SPECS.get(tag)
            if spec is None or tag in self._lists or spec.tag not in _GOODPUT_TAGS:
                raise ValueError(f"--goodput: '{tag}' is not a per-request metric; use one of "
                                 f"{', '.join(sorted(_GOODPUT_TAGS))}")
            values = self.column(tag)
            with np.errstate(invalid="ignore"):
                ok = values >= threshold if spec.larger_is_better else values <= threshold
            good &= ok & ~np.isnan(values)
        return int(good.sum())


_ITEMSIZE = {"I": 4, "d": 8}


def check_shard(shard: AggregateShard) -> None:
    """Raise `ValueError` (one line) unless `shard` is what an `Aggregator.shard()` can be: typed
    columns of whole values, scalar columns no longer than the success count, six row columns
    of one length, each row's ICL count matching the ICL column, no negative count. A shard
    comes off the network in Kubernetes: `merge` checks it before taking anything."""
    for cb in (*shard.lists.values(), ColumnBytes(typecode="d", data=shard.error_isl)):
        _check(cb)
    if any(_check(cb) > shard.success_count for cb in shard.scalars.values()):
        raise ValueError("a shard's scalar column is longer than its success count")
    sizes = {len(getattr(shard, f"row_{name}")) for name in _Rows.__slots__}
    if len(sizes) != 1 or sizes.pop() % 8:
        raise ValueError("a shard's row columns differ in length or are cut")
    icl_counts = np.frombuffer(shard.row_icl_count, dtype=np.int64)
    icl = shard.lists.get("inter_chunk_latency")
    if (icl_counts < 0).any() or int(icl_counts.sum()) != (0 if icl is None else _check(icl)):
        raise ValueError("a shard's rows do not own its inter_chunk_latency values")
    if min(shard.success_count, shard.cancelled, shard.warmup, *(n for _, n in shard.errors)) < 0:
        raise ValueError("a shard with a negative count")


def _check(cb: ColumnBytes) -> int:
    """The number of values in a shard's column; `ValueError` for an unknown type or cut bytes."""
    size = _ITEMSIZE.get(cb.typecode)
    if size is None:
        raise ValueError(f"a shard column of type {cb.typecode!r}; expected 'I' or 'd'")
    if len(cb.data) % size:
        raise ValueError(f"a shard column of {len(cb.data)} bytes is not a whole number of values")
    return len(cb.data) // size


_GOODPUT_TAGS = frozenset(s.tag for s in RECORD_METRICS) - {"inter_chunk_latency", "error_isl"}
