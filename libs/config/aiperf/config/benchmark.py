"""The benchmark model: one typed description of a benchmark, shaped like AIPerf's config v2
`benchmark:` body (models, endpoint, datasets, phases, tokenizer, artifacts, slos, runtime).

It is the single source of the `aiperf profile` flags' meaning, of `run_config.json` and of the
JSON Schema the operator's CRD is generated from (`benchmark_schema`). Defaults live here once.
Every constraint is either a `Meta` annotation (so it is in the JSON Schema) or a cross-field
rule in `__post_init__` (a `ValueError` naming the field; decoding turns it into a
`msgspec.ValidationError`). Decode with `aiperf.config.loader`, which also accepts AIPerf's
shorthands and camelCase keys; construct directly in code and tests.

Secrets are not part of the model: header values and the API key travel in the environment
(`SECRET_ENV_VARS`); the endpoint names only the headers.
"""

from __future__ import annotations

import enum
import functools
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

__all__ = [
    "GOODPUT_METRICS", "Artifacts", "Benchmark", "Cancellation", "ConcurrencyPhase", "ConstantPhase",
    "Dataset", "DatasetFormat", "Delay", "Endpoint", "EndpointKind", "FileDataset", "FixedSchedulePhase",
    "GammaPhase", "Length", "Phase", "PhaseKind", "PoissonPhase", "PrefixPrompts", "Prompts",
    "RatePhase", "Runtime", "SyntheticDataset", "TokenizerSpec", "benchmark_schema",
]


class _Spec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every model struct: immutable, keyword-only, unknown fields are an error (a typo in
    a config file must not be ignored)."""


def one_item_list(item: Any) -> functools.partial[list[Any]]:
    """A default factory for a one-item list (a fresh list each time; the item is immutable)."""
    return functools.partial(list, (item,))


PositiveInt = Annotated[int, Meta(ge=1)]
NonNegativeInt = Annotated[int, Meta(ge=0)]
PositiveFloat = Annotated[float, Meta(gt=0)]
NonNegativeFloat = Annotated[float, Meta(ge=0)]

_PORT = r"(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}|0)"
URL_PATTERN = (r"^https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~%!$&'()*+,;=-]+)"
               rf"(:{_PORT})?(/[^\s@]*)?$")
"""An http(s) URL with a host and, when given, a port in 0..65535, and no credentials (they are
secrets: `aiperf.config.loader` moves `user:password@` into an Authorization header)."""

Url = Annotated[str, Meta(pattern=URL_PATTERN, description="http(s)://host[:port][/path]")]
PhaseName = Annotated[str, Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_-]*$", max_length=63)]
HeaderName = Annotated[str, Meta(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")]
ModelName = Annotated[str, Meta(min_length=1, pattern=r"\S")]


class EndpointKind(enum.StrEnum):
    """OpenAI-compatible API kinds (`--endpoint-type`)."""

    CHAT = "chat"
    COMPLETIONS = "completions"
    EMBEDDINGS = "embeddings"


class Endpoint(_Spec, frozen=True, kw_only=True):
    """The server under test. `urls` holds exactly one base URL today (AIPerf's list shape);
    the request path follows from `type`. `header_names` are sent on every request; their
    values are secrets and come from the environment, never from this model."""

    urls: Annotated[list[Url], Meta(min_length=1, max_length=1)] = msgspec.field(
        default_factory=one_item_list("http://localhost:8000"))
    type: EndpointKind = EndpointKind.CHAT
    streaming: bool = False
    timeout: Annotated[float, Meta(gt=0, description="per-request timeout, seconds")] = 21600.0
    header_names: list[HeaderName] = []
    extra: dict[str, Any] = {}
    use_legacy_max_tokens: bool = False
    use_server_token_count: bool = False

    @property
    def url(self) -> str:
        """The base URL (no trailing slash)."""
        return self.urls[0].rstrip("/")


class Length(_Spec, frozen=True, kw_only=True):
    """A token or turn count drawn from Normal(mean, stddev), rounded, at least 1."""

    mean: Annotated[float, Meta(ge=1)]
    stddev: NonNegativeFloat = 0.0


class Delay(_Spec, frozen=True, kw_only=True):
    """A delay in milliseconds drawn from Normal(mean, stddev), clipped at 0."""

    mean: NonNegativeFloat = 0.0
    stddev: NonNegativeFloat = 0.0


class Prompts(_Spec, frozen=True, kw_only=True):
    """Request shapes: input length (synthetic prompts), output length (`max_tokens`; None lets
    the server decide), and the tokens per trace hash block (mooncake traces; None: 512)."""

    isl: Length = Length(mean=550)
    osl: Length | None = None
    block_size: PositiveInt | None = None


class PrefixPrompts(_Spec, frozen=True, kw_only=True):
    """A pool of `pool_size` shared prefixes of `length` tokens; each first turn starts with one
    (both 0: none)."""

    pool_size: NonNegativeInt = 0
    length: NonNegativeInt = 0


class DatasetFormat(enum.StrEnum):
    """Formats of dataset files (`--custom-dataset-type`)."""

    SINGLE_TURN = "single_turn"
    MULTI_TURN = "multi_turn"
    MOONCAKE_TRACE = "mooncake_trace"
    RANDOM_POOL = "random_pool"


class _DatasetBase(_Spec, tag_field="type", frozen=True, kw_only=True):
    name: PhaseName = "default"
    entries: PositiveInt = 100
    prompts: Prompts = Prompts()
    random_seed: int | None = None


class SyntheticDataset(_DatasetBase, tag="synthetic", frozen=True, kw_only=True):
    """`entries` conversations of synthetic prompts (turns and think time per conversation)."""

    prefix_prompts: PrefixPrompts = PrefixPrompts()
    turns: Length = Length(mean=1)
    turn_delay: Delay = Delay()


class FileDataset(_DatasetBase, tag="file", frozen=True, kw_only=True):
    """Conversations read from `path` (a JSONL file, or a folder for random_pool). `format` None
    is detected from the file. `entries` is how many conversations a random_pool draws."""

    path: Annotated[str, Meta(min_length=1)]
    format: DatasetFormat | None = None


Dataset = SyntheticDataset | FileDataset


class PhaseKind(enum.StrEnum):
    """What a phase is for: warmup requests are excluded from the results."""

    WARMUP = "warmup"
    PROFILING = "profiling"


class Cancellation(_Spec, frozen=True, kw_only=True):
    """Cancel `rate` percent of the requests (seeded draw), `delay` seconds after sending."""

    rate: Annotated[float, Meta(ge=0, le=100)] = 0.0
    delay: NonNegativeFloat = 0.0


DEFAULT_GRACE_PERIOD_S = 30.0


class _PhaseBase(_Spec, tag_field="type", frozen=True, kw_only=True):
    """Fields every phase has. A phase stops after `requests` credits or after `duration`
    seconds (then waits `grace_period` seconds, default 30, for requests in flight), never both.
    `kind` may be left out for the canonical names `warmup` and `profiling`."""

    name: PhaseName = "profiling"
    kind: PhaseKind | None = None
    requests: PositiveInt | None = None
    duration: PositiveFloat | None = None
    grace_period: NonNegativeFloat | None = None
    concurrency: PositiveInt | None = None
    cancellation: Cancellation = Cancellation()

    def __post_init__(self) -> None:
        if self.kind is None and self.name not in tuple(PhaseKind):
            raise ValueError(f"kind: required for the custom phase name {self.name!r} (warmup or profiling)")
        if self.kind is not None and self.name in tuple(PhaseKind) and self.kind != self.name:
            raise ValueError(f"kind: the name {self.name!r} is reserved for kind {self.name}")
        if self.requests is not None and self.duration is not None:
            raise ValueError("requests: choose one stop condition, requests or duration")
        if self.grace_period is not None and self.duration is None:
            raise ValueError("grace_period: needs duration")
        if self.needs_stop_condition and self.requests is None and self.duration is None:
            raise ValueError("requests: required (or duration)")

    needs_stop_condition = True

    @property
    def role(self) -> PhaseKind:
        """`kind`, or the kind its canonical name implies."""
        return self.kind or PhaseKind(self.name)

    @property
    def grace_s(self) -> float:
        """Seconds to wait for requests in flight after `duration` (0 without a duration)."""
        if self.duration is None:
            return 0.0
        return DEFAULT_GRACE_PERIOD_S if self.grace_period is None else self.grace_period


class ConcurrencyPhase(_PhaseBase, tag="concurrency", frozen=True, kw_only=True):
    """Closed loop: `concurrency` requests in flight, the next sent when one finishes."""

    concurrency: PositiveInt = 1


class RatePhase(_PhaseBase, frozen=True, kw_only=True):
    """Open loop: new conversations arrive at `rate` per second; `concurrency`, when set, caps the
    requests in flight."""

    rate: PositiveFloat


class PoissonPhase(RatePhase, tag="poisson", frozen=True, kw_only=True):
    """Exponential gaps between arrivals."""


class GammaPhase(RatePhase, tag="gamma", frozen=True, kw_only=True):
    """Gamma gaps of shape `smoothness` (1 is poisson, larger is more regular)."""

    smoothness: PositiveFloat = 1.0


class ConstantPhase(RatePhase, tag="constant", frozen=True, kw_only=True):
    """Arrivals exactly 1/rate apart."""


class FixedSchedulePhase(_PhaseBase, tag="fixed_schedule", frozen=True, kw_only=True):
    """Each conversation starts at its trace timestamp (relative to the earliest); the trace
    decides when the phase ends. Needs a file dataset with a timestamp on every entry."""

    needs_stop_condition = False


Phase = ConcurrencyPhase | PoissonPhase | GammaPhase | ConstantPhase | FixedSchedulePhase

GOODPUT_METRICS = (
    "time_to_first_token", "time_to_second_token", "time_to_first_output_token", "request_latency",
    "inter_token_latency", "inter_chunk_latency", "decode_duration", "output_token_throughput_per_user",
    "e2e_output_token_throughput", "prefill_throughput_per_user", "output_sequence_length",
    "input_sequence_length", "output_token_count", "reasoning_token_count", "usage_prompt_tokens",
    "usage_completion_tokens", "usage_total_tokens", "usage_reasoning_tokens", "error_isl",
    "osl_mismatch_diff_pct", "http_req_blocked", "http_req_dns_lookup", "http_req_connecting",
    "http_req_sending", "http_req_waiting", "http_req_receiving", "http_req_duration",
    "http_req_connection_overhead", "http_req_total", "http_req_data_sent", "http_req_data_received",
    "http_req_connection_reused", "http_req_chunks_sent", "http_req_chunks_received",
    "credit_to_start_latency", "effective_latency", "credit_to_send_delay", "schedule_lag",
    "co_aware_request_latency",
)
"""Per-request metrics an SLO may name (aiperf.metrics' RECORD_METRICS; a test keeps them equal)."""

GoodputMetric = Literal[GOODPUT_METRICS]  # type: ignore[valid-type]


class TokenizerSpec(_Spec, frozen=True, kw_only=True):
    """Tokenizer that counts tokens: a Hugging Face tokenizer.json (file or folder); None is the
    bundled Qwen tokenizer. Nothing is downloaded."""

    name: Annotated[str, Meta(min_length=1)] | None = None


ExportLevel = Literal["summary", "records", "raw"]
"""What a run writes (`--export-level`, AIPerf 0.13's): `summary` the aggregate exports only
(profile_export_aiperf.json/.csv, the console text, inputs.json); `records` also
profile_export.jsonl (one line per request); `raw` also profile_export_raw.jsonl (every request's
response bytes as received, with their arrival times)."""


class Artifacts(_Spec, frozen=True, kw_only=True):
    """Where the results go (`--artifact-dir`) and how much (`export_level`); `keep_dataset`
    also keeps the dataset's working files (`dataset/*.dat`) there (`--keep-dataset-files`)."""

    dir: Annotated[str, Meta(min_length=1)] = "artifacts"
    keep_dataset: bool = False
    export_level: ExportLevel = "records"


class ServerMetrics(_Spec, frozen=True, kw_only=True):
    """Scraping the inference server's Prometheus metrics (AIPerf 0.13's `--server-metrics`,
    on by default): `urls` are extra endpoints (a URL without a path gets `/metrics`), scraped
    with `<endpoint url>/metrics`; `enabled: false` is `--no-server-metrics`; `interval` the
    seconds between scrapes while a phase runs."""

    enabled: bool = True
    urls: list[str] = []
    interval: PositiveFloat = 0.5


class Runtime(_Spec, frozen=True, kw_only=True):
    """Processes of a local run: `workers` (None: max(1, min(0.75 x CPUs - 1, 32)), at most the
    concurrency) and `record_processors` (None: workers / 4, at least 1); `ui` None picks
    dashboard on a terminal, none elsewhere."""

    workers: PositiveInt | None = None
    record_processors: PositiveInt | None = None
    ui: Literal["none", "simple", "dashboard"] | None = None


class Benchmark(_Spec, frozen=True, kw_only=True):
    """One benchmark (AIPerf config v2's `benchmark:` body, the fields we support).

    Rules beyond single fields: one model, one dataset; phases are an optional warmup followed
    by exactly one profiling phase with distinct names; a fixed-schedule phase needs a file
    dataset."""

    models: Annotated[list[ModelName], Meta(min_length=1, max_length=1)]
    endpoint: Endpoint = Endpoint()
    datasets: Annotated[list[Dataset], Meta(min_length=1, max_length=1)] = msgspec.field(
        default_factory=one_item_list(SyntheticDataset()))
    phases: Annotated[list[Phase], Meta(min_length=1, max_length=2)] = msgspec.field(
        default_factory=one_item_list(ConcurrencyPhase(requests=10)))
    tokenizer: TokenizerSpec = TokenizerSpec()
    artifacts: Artifacts = Artifacts()
    slos: dict[GoodputMetric, PositiveFloat] = {}
    runtime: Runtime = Runtime()
    random_seed: int | None = None
    server_metrics: ServerMetrics = ServerMetrics()

    def __post_init__(self) -> None:
        kinds = [p.role for p in self.phases]
        if kinds not in ([PhaseKind.PROFILING], [PhaseKind.WARMUP, PhaseKind.PROFILING]):
            raise ValueError("phases: an optional warmup phase, then one profiling phase "
                             f"(got {', '.join(map(str, kinds))})")
        if len({p.name.lower() for p in self.phases}) != len(self.phases):
            raise ValueError("phases: names must be distinct")
        if (any(isinstance(p, FixedSchedulePhase) for p in self.phases)
                and not isinstance(self.dataset, FileDataset)):
            raise ValueError("phases: fixed_schedule needs a file dataset with timestamps")

    @property
    def model(self) -> str:
        """The model name sent in every request."""
        return self.models[0]

    @property
    def dataset(self) -> Dataset:
        """The run's one dataset."""
        return self.datasets[0]

    @property
    def profiling(self) -> Phase:
        """The profiling phase."""
        return self.phases[-1]

    @property
    def warmup(self) -> Phase | None:
        """The warmup phase, if any."""
        return self.phases[0] if len(self.phases) == 2 else None

    @property
    def dataset_seed(self) -> int | None:
        """The dataset's own seed, else the benchmark's."""
        seed = self.dataset.random_seed
        return self.random_seed if seed is None else seed


def benchmark_schema() -> dict[str, Any]:
    """The JSON Schema of `Benchmark` (msgspec's, `$defs` + `$ref`): what the operator's CRD
    generator consumes. Stable for an unchanged model (a golden test pins it)."""
    schema: dict[str, Any] = msgspec.json.schema(Benchmark)
    return schema
