"""A benchmark written the way AIPerf 0.13 writes one: its config v2 body in camelCase, with its
own field names and shapes, so AIPerf's loader reads what we generate (an AIPerfJob's
`spec.benchmark`, for instance) and reading it back with `aiperf.config.normalize` gives the
same benchmark.

Differences from our canonical form (`msgspec.to_builtins(benchmark)`): `models` is
`{items: [{name}]}`; datasets and phases always carry their `name` (AIPerf requires it);
`artifacts.export_level` is AIPerf's `records: false` / `raw: true`; fields only a local run
has (`artifacts.keep_dataset`, `endpoint.header_names`: the header values travel in a Secret) are
left out, and so are values equal to their defaults; `random_seed` is the envelope's
(`randomSeed` beside `benchmark`), returned separately.
"""

from __future__ import annotations

from typing import Any

import msgspec

from aiperf.config.benchmark import (
    Artifacts,
    Benchmark,
    Endpoint,
    Length,
    Phase,
    PhaseKind,
    Runtime,
    ServerMetrics,
    SyntheticDataset,
)

__all__ = ["to_aiperf_body"]


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _compact(value: Any, *, camel: bool = True) -> Any:
    """Builtins of `value` without fields equal to their defaults, keys camelCase."""
    if isinstance(value, msgspec.Struct):
        out: dict[str, Any] = {}
        config = value.__struct_config__
        if config.tag_field is not None:
            out[config.tag_field] = config.tag
        for field in msgspec.structs.fields(value):
            item = getattr(value, field.name)
            default = field.default_factory() if field.default_factory is not msgspec.NODEFAULT else field.default
            if default is not msgspec.NODEFAULT and item == default:
                continue
            out[_camel(field.name) if camel else field.name] = _compact(item, camel=camel)
        return out
    if isinstance(value, dict):
        return {msgspec.to_builtins(k): _compact(v, camel=camel) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_compact(v, camel=camel) for v in value]
    return msgspec.to_builtins(value)


def _length(length: Length) -> dict[str, Any]:
    out = _compact(length)
    if length.mean is not None:
        out["mean"] = length.mean  # always written: a fixed length is {mean: N}
    return out


def _endpoint(endpoint: Endpoint) -> dict[str, Any]:
    out = _compact(endpoint)
    out.pop("headerNames", None)
    out["urls"] = list(endpoint.urls)
    if endpoint.type != Endpoint().type:
        out["type"] = str(endpoint.type)
    return out


def _dataset(dataset: Any) -> dict[str, Any]:
    out = {"name": dataset.name, **_compact(dataset)}
    prompts = dataset.prompts
    body = _compact(prompts)
    if isinstance(dataset, SyntheticDataset) or prompts.isl != type(prompts)().isl:
        body["isl"] = _length(prompts.isl)
    if prompts.osl is not None:
        body["osl"] = _length(prompts.osl)
    if prompts.sequence_distribution:
        body.pop("isl", None)
        body["sequenceDistribution"] = [{"isl": _length(e.isl), "osl": _length(e.osl), "probability": e.probability}
                                        for e in prompts.sequence_distribution]
    if body:
        out["prompts"] = body
    if isinstance(dataset, SyntheticDataset) and dataset.turns != SyntheticDataset().turns:
        out["turns"] = _length(dataset.turns)
    return out


def _phase(phase: Phase) -> dict[str, Any]:
    out: dict[str, Any] = {"name": phase.name}
    if phase.kind is not None and phase.name not in tuple(PhaseKind):
        out["kind"] = str(phase.kind)
    out.update({k: v for k, v in _compact(phase).items() if k not in ("name", "kind")})
    return out


def _artifacts(artifacts: Artifacts) -> dict[str, Any]:
    out = _compact(artifacts)
    out.pop("keepDataset", None)
    level = out.pop("exportLevel", None)
    if level == "summary":
        out["records"] = False
    elif level == "raw":
        out["raw"] = True
    return out


def _models(benchmark: Benchmark) -> dict[str, Any]:
    selection = benchmark.model_selection
    weights: list[float | None] = [*selection.weights] or [None] * len(benchmark.models)
    out: dict[str, Any] = {"items": [{"name": name} if weight is None else {"name": name, "weight": weight}
                                     for name, weight in zip(benchmark.models, weights, strict=True)]}
    if selection.strategy != "round_robin":
        out["strategy"] = selection.strategy
    return out


def to_aiperf_body(benchmark: Benchmark) -> tuple[dict[str, Any], int | None]:
    """(AIPerf's config v2 body of `benchmark`, its random seed for the envelope's `randomSeed`)."""
    body: dict[str, Any] = {
        "models": _models(benchmark),
        "endpoint": _endpoint(benchmark.endpoint),
        "datasets": [_dataset(d) for d in benchmark.datasets],
        "phases": [_phase(p) for p in benchmark.phases],
    }
    for key, value, default in (("artifacts", _artifacts(benchmark.artifacts), {}),
                                ("slos", dict(benchmark.slos), {}),
                                ("tokenizer", _compact(benchmark.tokenizer), {}),
                                ("runtime", _compact(benchmark.runtime), _compact(Runtime())),
                                ("serverMetrics", _compact(benchmark.server_metrics), _compact(ServerMetrics())),
                                ("gpuTelemetry", _compact(benchmark.gpu_telemetry), {})):
        if value != default:
            body[key] = value
    if benchmark.logging.level is not None:
        body["logging"] = {"level": benchmark.logging.level.upper()}
    return body, benchmark.random_seed
