"""Prometheus text exposition -> `Family` values, with `prometheus_client`'s maintained parser.

Kept: counters, gauges, histograms, and untyped families (as `unknown`, treated like gauges, as
AIPerf 0.13 does). Dropped: summaries, info, state sets and `_created` samples or families of
counters and histograms (creation times; nothing in the export uses them). A family name is the parser's: a counter's without its `_total` suffix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

Labels = tuple[tuple[str, str], ...]
"""A series' labels, sorted by name (hashable; `dict(labels)` gives them back)."""

KINDS = ("counter", "gauge", "histogram", "unknown")


@dataclass(frozen=True)
class HistogramValue:
    """One histogram series at one moment: cumulative `buckets` as (upper bound, count) pairs in
    ascending order, the last one `+Inf`; `count` and `sum` of every observation."""

    buckets: tuple[tuple[float, float], ...]
    count: float
    sum: float


@dataclass
class Family:
    """One metric family of one scrape: `kind` one of `KINDS`, `description` its HELP text,
    `series` each label set's value (a float, or a `HistogramValue` for histograms)."""

    name: str
    kind: str
    description: str
    series: dict[Labels, float | HistogramValue] = field(default_factory=dict)


class ExpositionError(ValueError):
    """The text is not Prometheus exposition format."""


def parse_metrics(text: str) -> dict[str, Family]:
    """Every kept family of `text` by name. Raises `ExpositionError` for text the parser rejects.
    `prometheus_client` is imported at the first call, not with this module: the package (its
    exposition server, http.server and html included: ~30 ms of CPU) is no part of what the
    modules importing `aiperf.servermetrics` for other names need (the records-manager's server
    identity, imported by the zygote before the first fork)."""
    from prometheus_client.parser import text_string_to_metric_families

    families: dict[str, Family] = {}
    try:
        for fam in text_string_to_metric_families(text):
            kind = "unknown" if fam.type in ("untyped", "unknown") else fam.type
            if kind not in KINDS:
                continue
            out = families[fam.name] = Family(fam.name, kind, fam.documentation)
            if kind == "histogram":
                out.series.update(_histograms(fam.name, fam.samples))
                continue
            for sample in fam.samples:
                if sample.name.endswith("_created"):
                    continue
                out.series[_labels(sample.labels)] = float(sample.value)
    except ValueError as exc:  # the parser's one error type for malformed lines
        raise ExpositionError(f"not Prometheus text format: {exc}") from None
    for name in [n for n in families if n.endswith("_created")]:  # creation times, not measurements
        base = families.get(name.removesuffix("_created"))
        if base is not None and base.kind in ("counter", "histogram"):
            del families[name]
    return families


def _labels(labels: dict[str, str], drop: str = "") -> Labels:
    return tuple(sorted((k, v) for k, v in labels.items() if k != drop))


def _histograms(name: str, samples: list) -> dict[Labels, HistogramValue]:
    buckets: dict[Labels, list[tuple[float, float]]] = {}
    counts: dict[Labels, float] = {}
    sums: dict[Labels, float] = {}
    for sample in samples:
        key = _labels(sample.labels, drop="le")
        if sample.name == f"{name}_bucket":
            buckets.setdefault(key, []).append((float(sample.labels["le"]), float(sample.value)))
        elif sample.name == f"{name}_count":
            counts[key] = float(sample.value)
        elif sample.name == f"{name}_sum":
            sums[key] = float(sample.value)
    out: dict[Labels, HistogramValue] = {}
    for key, pairs in buckets.items():
        pairs.sort()
        if not pairs or not math.isinf(pairs[-1][0]):
            pairs.append((math.inf, counts.get(key, pairs[-1][1] if pairs else 0.0)))
        out[key] = HistogramValue(tuple(pairs), counts.get(key, pairs[-1][1]), sums.get(key, 0.0))
    return out
