"""Hypothesis strategies of valid benchmark documents (canonical snake_case), shared by the
model's tests and the config reader's."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from aiperf.config.benchmark import GOODPUT_METRICS

positive = st.integers(min_value=1, max_value=10_000)
positive_float = st.floats(min_value=0.001, max_value=1e6, allow_nan=False)
non_negative = st.floats(min_value=0, max_value=1e6, allow_nan=False)
length = st.fixed_dictionaries({"mean": st.floats(min_value=1, max_value=1e5)}, optional={"stddev": non_negative})
stop = st.one_of(st.fixed_dictionaries({"requests": positive}),
                 st.fixed_dictionaries({"duration": positive_float}, optional={"grace_period": non_negative}))
ramp = st.fixed_dictionaries({"duration": positive_float})
common = st.fixed_dictionaries({}, optional={
    "concurrency": positive, "concurrency_ramp": ramp,
    "cancellation": st.fixed_dictionaries({}, optional={"rate": st.floats(0, 100), "delay": non_negative})})


@st.composite
def phase(draw: st.DrawFn, name: str) -> dict[str, Any]:
    kind = draw(st.sampled_from(["concurrency", "poisson", "gamma", "constant"]))
    out: dict[str, Any] = {"type": kind, "name": name, **draw(stop), **draw(common)}
    if kind != "concurrency":
        out["rate"] = draw(positive_float)
        if draw(st.booleans()):
            out["rate_ramp"] = draw(ramp)
    if kind == "gamma" and draw(st.booleans()):
        out["smoothness"] = draw(positive_float)
    return out


@st.composite
def benchmark_documents(draw: st.DrawFn) -> dict[str, Any]:
    phases = [draw(phase("warmup"))] if draw(st.booleans()) else []
    phases.append(draw(phase("profiling")))
    dataset = draw(st.one_of(
        st.fixed_dictionaries({"type": st.just("synthetic")}, optional={
            "entries": positive, "turns": length, "random_seed": st.integers(0, 2**32),
            "prompts": st.fixed_dictionaries({"isl": length}, optional={"osl": length, "block_size": positive})}),
        st.fixed_dictionaries({"type": st.just("file"), "path": st.text(min_size=1, max_size=20)}, optional={
            "format": st.sampled_from(["single_turn", "multi_turn", "mooncake_trace", "random_pool"])})))
    if dataset["type"] == "file" and draw(st.booleans()):
        phases[-1] = {"type": "fixed_schedule", "name": "profiling"}
    return {
        "models": [draw(st.from_regex(r"[A-Za-z0-9/._-]{1,30}", fullmatch=True))],
        "endpoint": draw(st.fixed_dictionaries({}, optional={
            "urls": st.just(["http://localhost:8000"]) | st.just(["https://[::1]:443/v1"]),
            "type": st.sampled_from(["chat", "completions", "embeddings"]), "streaming": st.booleans(),
            "timeout": positive_float, "header_names": st.lists(st.from_regex(r"X-[A-Za-z]{1,8}", fullmatch=True),
                                                                max_size=3),
            "extra": st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=8), max_size=3)})),
        "datasets": [dataset],
        "phases": phases,
        "slos": draw(st.dictionaries(st.sampled_from(GOODPUT_METRICS), positive_float, max_size=3)),
        "random_seed": draw(st.none() | st.integers(0, 2**32)),
        "artifacts": draw(st.fixed_dictionaries({}, optional={"slice_duration": positive_float})),
        "gpu_telemetry": draw(st.fixed_dictionaries({}, optional={
            "enabled": st.booleans(), "urls": st.lists(st.just("http://node:9400/metrics"), max_size=2)})),
    }
