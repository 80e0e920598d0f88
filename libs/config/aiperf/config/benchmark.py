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
import math
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit

import msgspec
from msgspec import Meta

__all__ = [
    "GOODPUT_METRICS", "Artifacts", "Audio", "Benchmark", "Cancellation", "ConcurrencyPhase", "ConstantPhase",
    "Dataset", "DatasetFormat", "Delay", "Endpoint", "EndpointKind", "FileDataset", "FixedSchedulePhase",
    "GammaPhase", "Images", "Length", "LogLevel", "Logging", "ModelSelection", "ModelSelectionStrategy", "Peak",
    "Phase", "PhaseKind", "Point", "PoissonPhase",
    "PrefixPrompts", "Prompts", "RatePhase", "Runtime", "SequenceEntry", "ServerMetricsFormat",
    "SyntheticDataset", "TokenizerSpec", "UserCentricPhase", "benchmark_schema", "lognormal_sigma",
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


MAX_URLS = 256
"""The most endpoint URLs one benchmark may spread its requests over."""


class Endpoint(_Spec, frozen=True, kw_only=True):
    """The server under test: `urls`, each a base URL or a full endpoint URL; with several, each
    conversation goes to the next one in turn (`url_strategy` `round_robin`, AIPerf's: a
    conversation's later turns follow its first). The request path follows from `path`
    when given (`""`: none appended), else from `type` (`request_url`). `timeout` is per request,
    seconds, 0 for none. `header_names` are sent on every request; their values are secrets and
    come from the environment, never from this model. `connection_reuse` is how workers use
    their connections (AIPerf's): `pooled` (the default) shares them among all requests, `never`
    opens one per request and closes it after the response, `sticky-user-sessions` keeps one per
    conversation for its turns and closes it after the final turn. `wait_for_model_timeout` (s,
    0: no wait) makes the run wait, before it configures anything, until every URL is ready, as
    AIPerf 0.13.0's readiness probe does: `wait_for_model_mode` `inference` posts a one-token
    request (any status below 500 is ready), `models` polls `/v1/models` for the model (a 404
    there falls back to a plain GET of the URL), `both` does both; a try every
    `wait_for_model_interval` s; the run fails when a URL is not ready in time."""

    urls: Annotated[list[Url], Meta(min_length=1, max_length=MAX_URLS)] = msgspec.field(
        default_factory=one_item_list("http://localhost:8000"))
    url_strategy: Literal["round_robin"] = "round_robin"
    type: EndpointKind = EndpointKind.CHAT
    path: Annotated[str, Meta(pattern=r"^(/[^\s?#]*)?$", max_length=512)] | None = None
    streaming: bool = False
    timeout: Annotated[float, Meta(ge=0, description="per-request timeout, seconds (0: none)")] = 21600.0
    header_names: list[HeaderName] = []
    extra: dict[str, Any] = {}
    use_legacy_max_tokens: bool = False
    use_server_token_count: bool = False
    connection_reuse: Literal["pooled", "never", "sticky-user-sessions"] = "pooled"
    wait_for_model_timeout: NonNegativeFloat = 0.0
    wait_for_model_interval: PositiveFloat = 5.0
    wait_for_model_mode: Literal["models", "inference", "both"] = "inference"

    def __post_init__(self) -> None:
        if self.wait_for_model_timeout == 0:
            unused = [name for name, value, default in (("wait_for_model_interval", self.wait_for_model_interval, 5.0),
                                                        ("wait_for_model_mode", self.wait_for_model_mode, "inference"))
                      if value != default]
            if unused:
                raise ValueError(f"{', '.join(unused)}: no effect unless wait_for_model_timeout is positive (as in AIPerf)")

    @property
    def url(self) -> str:
        """The first URL as given (no trailing slash)."""
        return self.urls[0].rstrip("/")

    def request_urls(self, default_path: str) -> list[str]:
        """`request_url` of every URL, in order (a credit's `url_index` picks one)."""
        return [self.request_url(default_path, i) for i in range(len(self.urls))]

    def request_url(self, default_path: str, index: int = 0) -> str:
        """Where requests go: URL `index` joined with `path` (else `default_path`, the kind's
        path, e.g. `/v1/chat/completions`), as AIPerf joins them: a URL that already ends with
        the path is used as it is, and a URL ending in `/v1` takes the path without its own
        `/v1` (`http://h:8000/v1` + `/v1/chat/completions` is `http://h:8000/v1/chat/completions`)."""
        parts = urlsplit(self.urls[index])
        base = parts.path.rstrip("/")
        sub = (default_path if self.path is None else self.path).lstrip("/")
        if sub and not base.endswith("/" + sub):
            if base.endswith("/v1") and sub.startswith("v1/"):
                sub = sub.removeprefix("v1/")
            base = f"{base}/{sub}"
        return urlunsplit(parts._replace(path=base))

    def metrics_url(self, index: int = 0) -> str:
        """The server's Prometheus endpoint: `/metrics` at the root of URL `index`."""
        parts = urlsplit(self.urls[index])
        return urlunsplit((parts.scheme, parts.netloc, "/metrics", "", ""))


class Peak(_Spec, frozen=True, kw_only=True):
    """One component of a mixture: a normal (`mean`, `stddev`) or log-normal (`mean`, `median`)
    draw, chosen with probability `weight` / the sum of the weights."""

    mean: NonNegativeFloat
    stddev: NonNegativeFloat = 0.0
    median: PositiveFloat | None = None
    weight: NonNegativeFloat = 1.0

    def __post_init__(self) -> None:
        if self.median is not None and self.median > self.mean:
            raise ValueError("median: at most the mean (a log-normal is skewed right)")
        if self.median is not None and self.stddev:
            raise ValueError("stddev: give a normal (mean, stddev) or a log-normal (mean, median), not both")


class Point(_Spec, frozen=True, kw_only=True):
    """One value of an empirical distribution, drawn with probability `weight` / the sum."""

    value: NonNegativeFloat
    weight: PositiveFloat = 1.0


class Length(_Spec, frozen=True, kw_only=True):
    """A token or turn count (AIPerf's distributions), rounded and at least 1, then kept within
    `min`..`max` when given. Exactly one shape:

    - normal: `mean` and `stddev` (0: always the mean; a bare number in a file is `{mean: N}`),
    - log-normal: `mean` and `median` (median <= mean; sigma = sqrt(2 ln(mean / median))),
    - mixture: `peaks` (two or more normal or log-normal components with weights),
    - empirical: `points` (values with weights)."""

    mean: NonNegativeFloat | None = None
    stddev: NonNegativeFloat = 0.0
    median: PositiveFloat | None = None
    peaks: list[Peak] = []
    points: list[Point] = []
    min: NonNegativeFloat | None = None
    max: NonNegativeFloat | None = None

    def __post_init__(self) -> None:
        shapes = [self.mean is not None, bool(self.peaks), bool(self.points)]
        if sum(shapes) != 1:
            raise ValueError("mean: give one shape: mean (with stddev or median), peaks, or points")
        if self.mean is not None and self.mean < 1 and self.median is None:
            raise ValueError("mean: at least 1")
        if self.median is not None and (self.mean is None or self.median > self.mean):
            raise ValueError("median: needs a mean at least as large (a log-normal is skewed right)")
        if self.median is not None and self.stddev:
            raise ValueError("stddev: give a normal (mean, stddev) or a log-normal (mean, median), not both")
        if self.peaks and len(self.peaks) < 2:
            raise ValueError("peaks: a mixture needs at least two peaks")
        if self.peaks and not sum(p.weight for p in self.peaks) > 0:
            raise ValueError("peaks: the weights sum to 0")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError("min: at most max")

    @property
    def is_fixed(self) -> bool:
        """True when every draw is the same value (a mean without spread or bounds to hit)."""
        return self.mean is not None and self.median is None and self.stddev == 0

    @property
    def expected(self) -> float:
        """The mean of the distribution before rounding and bounds."""
        if self.peaks:
            total = sum(p.weight for p in self.peaks)
            return sum(p.weight * p.mean for p in self.peaks) / total
        if self.points:
            total = sum(p.weight for p in self.points)
            return sum(p.weight * p.value for p in self.points) / total
        assert self.mean is not None
        return self.mean


def lognormal_sigma(mean: float, median: float) -> float:
    """The sigma of the log-normal with this mean and median (0 when they are equal)."""
    return math.sqrt(2.0 * math.log(mean / median)) if median < mean else 0.0


class Delay(_Spec, frozen=True, kw_only=True):
    """A delay in milliseconds drawn from Normal(mean, stddev), clipped at 0."""

    mean: NonNegativeFloat = 0.0
    stddev: NonNegativeFloat = 0.0


class SequenceEntry(_Spec, frozen=True, kw_only=True):
    """One (ISL, OSL) pair of a sequence distribution, chosen with weight `probability`."""

    isl: Length
    osl: Length
    probability: PositiveFloat


class Prompts(_Spec, frozen=True, kw_only=True):
    """Request shapes: input length (synthetic prompts), output length (`max_tokens`; None lets
    the server decide), or instead of both a `sequence_distribution` of (ISL, OSL) pairs drawn
    per turn; and the tokens per trace hash block (mooncake traces; None: 512). `batch_size`
    prompts of a synthetic dataset go in each request (AIPerf's prompt batch: each its own ISL
    draw; the input list of embeddings and completions, text parts of a chat message)."""

    isl: Length = Length(mean=550)
    osl: Length | None = None
    sequence_distribution: list[SequenceEntry] = []
    block_size: PositiveInt | None = None
    batch_size: Annotated[int, Meta(ge=1, le=1024)] = 1

    def __post_init__(self) -> None:
        if self.sequence_distribution and (self.isl != Length(mean=550) or self.osl is not None):
            raise ValueError("sequence_distribution: replaces isl and osl, give one or the other")


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
    sampling: Literal["sequential"] = "sequential"


class Images(_Spec, frozen=True, kw_only=True):
    """Synthetic images sent with each turn (AIPerf's `images`): `batch_size` per turn (0:
    none), each random noise (`source: noise`, AIPerf's default) of `width` x `height` pixels
    (drawn per image), encoded as `format` (`random`: png or jpeg, drawn per image) in a
    `data:image/<format>;base64,` URL, sent as chat `image_url` parts."""

    batch_size: NonNegativeInt = 0
    width: Length = Length(mean=512)
    height: Length = Length(mean=512)
    format: Literal["png", "jpeg", "random"] = "jpeg"
    source: Literal["noise"] = "noise"
    source_sampling: Literal["random-with-replacement"] = "random-with-replacement"


class Seconds(_Spec, frozen=True, kw_only=True):
    """A duration in seconds drawn from Normal(mean, stddev), at least 0.01 (AIPerf's audio
    length)."""

    mean: Annotated[float, Meta(ge=0.01)]
    stddev: NonNegativeFloat = 0.0


class Audio(_Spec, frozen=True, kw_only=True):
    """Synthetic audio sent with each turn (AIPerf's `audio`): `batch_size` clips per turn (0:
    none), each Gaussian noise (AIPerf's) `length` seconds long, at a sample rate (kHz) and bit
    depth drawn from `sample_rates` and `depths`, `channels` channels, as a WAV file sent as a
    chat `input_audio` part."""

    batch_size: NonNegativeInt = 0
    length: Seconds = Seconds(mean=10.0)
    format: Literal["wav"] = "wav"
    sample_rates: Annotated[list[Annotated[float, Meta(ge=1, le=192)]], Meta(min_length=1)] = msgspec.field(
        default_factory=lambda: [16.0])
    depths: Annotated[list[Literal[8, 16, 24, 32]], Meta(min_length=1)] = msgspec.field(
        default_factory=lambda: [16])
    channels: Annotated[int, Meta(ge=1, le=2)] = 1


class SyntheticDataset(_DatasetBase, tag="synthetic", frozen=True, kw_only=True):
    """`entries` conversations of synthetic prompts (turns and think time per conversation; every
    think time is multiplied by `turn_delay_ratio`), with `images` and `audio` per turn when
    their batch size is set. Conversations are sent in order, wrapping around (`sampling:
    sequential`)."""

    prefix_prompts: PrefixPrompts = PrefixPrompts()
    turns: Length = Length(mean=1)
    turn_delay: Delay = Delay()
    turn_delay_ratio: NonNegativeFloat = 1.0
    images: Images = Images()
    audio: Audio = Audio()


class FileDataset(_DatasetBase, tag="file", frozen=True, kw_only=True):
    """Conversations read from `path` (a JSONL file, or a folder for random_pool), or given inline
    as `records` (the lines of such a file, one mapping each). `format` None is detected from the
    data. `entries` is how many conversations a random_pool draws."""

    path: Annotated[str, Meta(min_length=1)] | None = None
    records: list[dict[str, Any]] = []
    format: DatasetFormat | None = None

    def __post_init__(self) -> None:
        if (self.path is None) == (not self.records):
            raise ValueError("path: give a path or inline records, exactly one")
        if self.records and self.format is DatasetFormat.RANDOM_POOL:
            raise ValueError("records: a random_pool is read from files (give path)")
        if self.prompts.batch_size != 1:
            raise ValueError("prompts: batch_size is for synthetic prompts (a file's turn gives its own texts)")


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


class Ramp(_Spec, frozen=True, kw_only=True):
    """A value ramped up to its target over `duration` seconds (AIPerf's `concurrencyRamp`,
    `rateRamp`; a number or `"60s"` is the duration), linearly (`strategy: linear`, AIPerf's
    default): concurrency in steps of 1 from 1, evenly spaced; a rate from target x 0.1 s /
    duration, raised every 0.1 s."""

    duration: PositiveFloat


class _PhaseBase(_Spec, tag_field="type", frozen=True, kw_only=True):
    """Fields every phase has. A phase stops after `requests` credits or after `duration`
    seconds, whichever comes first (after a duration it waits `grace_period` seconds, default 30,
    for requests in flight); `sessions` stops starting conversations after that many (their later
    turns are still sent; AIPerf's session count). `kind` may be left out for the canonical names `warmup` and
    `profiling`; `exclude_from_results` follows the kind (warmup is excluded, profiling is not)
    and may only say so. `concurrency_ramp` raises the concurrency (a closed loop's users, a rate
    phase's cap; nothing without one) from 1 to `concurrency` over its duration.
    `prefill_concurrency` caps the requests waiting for their first token (AIPerf's prefill
    slots: taken when a credit is issued, given back when its first content arrives or it
    returns; at most `concurrency`), and `prefill_ramp` raises that cap from 1 the same way."""

    name: PhaseName = "profiling"
    kind: PhaseKind | None = None
    exclude_from_results: bool | None = None
    requests: PositiveInt | None = None
    sessions: PositiveInt | None = None
    duration: PositiveFloat | None = None
    grace_period: NonNegativeFloat | None = None
    concurrency: PositiveInt | None = None
    concurrency_ramp: Ramp | None = None
    prefill_concurrency: PositiveInt | None = None
    prefill_ramp: Ramp | None = None
    cancellation: Cancellation = Cancellation()

    def __post_init__(self) -> None:
        if self.kind is None and self.name not in tuple(PhaseKind):
            raise ValueError(f"kind: required for the custom phase name {self.name!r} (warmup or profiling)")
        if self.kind is not None and self.name in tuple(PhaseKind) and self.kind != self.name:
            raise ValueError(f"kind: the name {self.name!r} is reserved for kind {self.name}")
        if self.exclude_from_results is not None and self.exclude_from_results != (self.role is PhaseKind.WARMUP):
            raise ValueError(f"exclude_from_results: a {self.role} phase is always "
                             f"{'excluded from' if self.role is PhaseKind.WARMUP else 'part of'} the results")
        if self.grace_period is not None and self.duration is None:
            raise ValueError("grace_period: needs duration")
        if self.needs_stop_condition and self.requests is None and self.duration is None and self.sessions is None:
            raise ValueError("requests: required (or duration, or sessions)")
        if self.prefill_concurrency is not None and self.concurrency is not None \
                and self.prefill_concurrency > self.concurrency:
            raise ValueError(f"prefill_concurrency: at most concurrency ({self.concurrency}), "
                             f"got {self.prefill_concurrency}")
        if self.prefill_ramp is not None and self.prefill_concurrency is None:
            raise ValueError("prefill_ramp: needs prefill_concurrency")

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
    requests in flight; `rate_ramp` raises the rate to `rate` over its duration."""

    rate: PositiveFloat
    rate_ramp: Ramp | None = None


class PoissonPhase(RatePhase, tag="poisson", frozen=True, kw_only=True):
    """Exponential gaps between arrivals."""


class GammaPhase(RatePhase, tag="gamma", frozen=True, kw_only=True):
    """Gamma gaps of shape `smoothness` (1 is poisson, larger is more regular)."""

    smoothness: PositiveFloat = 1.0


class ConstantPhase(RatePhase, tag="constant", frozen=True, kw_only=True):
    """Arrivals exactly 1/rate apart."""


class UserCentricPhase(RatePhase, tag="user_centric", frozen=True, kw_only=True):
    """AIPerf's user-centric rate: `users` users share `rate` requests per second, each sending
    its conversation's next turn `users / rate` seconds after its previous one (or as soon as
    that returned, when later). At the start the users are spread over their sessions' lifetime
    as AIPerf spreads them (a steady state from t=0, first turns `1 / rate` apart); a new user
    replaces each one when its turns are due to end. No `rate_ramp` or `concurrency_ramp`."""

    users: PositiveInt

    def __post_init__(self) -> None:
        super().__post_init__()
        for ramp in ("rate_ramp", "concurrency_ramp"):
            if getattr(self, ramp) is not None:
                raise ValueError(f"{ramp}: not for a user_centric phase (its users keep their own pace)")


class FixedSchedulePhase(_PhaseBase, tag="fixed_schedule", frozen=True, kw_only=True):
    """Each conversation starts at its trace timestamp, relative to the earliest
    (`auto_offset`, AIPerf's default) or to the phase start (timestamps as written); the trace
    decides when the phase ends (or `requests` or `duration`, when given, earlier). Needs a file
    dataset with a timestamp on every entry. `start_offset`/`end_offset` (ms, inclusive) replay
    only the conversations whose first timestamp lies in that window; with `start_offset` the
    replay's zero is `start_offset` (so `auto_offset` must be false), as in AIPerf 0.13.0."""

    auto_offset: bool = True
    start_offset: NonNegativeInt | None = None
    end_offset: NonNegativeInt | None = None

    needs_stop_condition = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.auto_offset and self.start_offset is not None:
            raise ValueError("start_offset: needs auto_offset false (the replay starts at start_offset)")
        if self.start_offset is not None and self.end_offset is not None and self.start_offset > self.end_offset:
            raise ValueError(f"start_offset {self.start_offset}: after end_offset {self.end_offset}")


Phase = ConcurrencyPhase | PoissonPhase | GammaPhase | ConstantPhase | UserCentricPhase | FixedSchedulePhase

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


class UserFile(_Spec, frozen=True, kw_only=True):
    """A file written into the artifact folder before the run starts (AIPerf's
    `artifacts.user_files`; `aiperf.config.user_files`): `path` relative to the folder, `format`
    json/yaml (structured `content`) or text (a string), every string a Jinja2 template."""

    path: str
    format: Literal["json", "yaml", "text"]
    content: Any

    def __post_init__(self) -> None:
        from aiperf.config.user_files import check_path

        if (why := check_path(self.path)) is not None:
            raise ValueError(f"path: {why}: {self.path!r}")
        if self.format == "text" and not isinstance(self.content, str):
            raise ValueError(f"content: format text needs a string ({self.path!r})")
        if self.format != "text" and isinstance(self.content, str):
            raise ValueError(f"content: format {self.format} needs structured content, or format: text "
                             f"({self.path!r})")


class Artifacts(_Spec, frozen=True, kw_only=True):
    """Where the results go (`--artifact-dir`) and how much (`export_level`, from AIPerf's
    `records: false` and `raw: true`); `keep_dataset` also keeps the dataset's working files
    (`dataset/*.dat`) there (`--keep-dataset-files`); `auto_plot` draws the plots once the
    exports are written (`--auto-plot`), and with `plot_required` a plot that fails fails the
    run; `slice_duration` (seconds, AIPerf's `--slice-duration`) also writes the profiling
    phase's metrics per window of that length (`profile_export_aiperf_timeslices.json/.csv`);
    `user_files` are written into the folder before the run starts (`UserFile`); `trace`
    writes each request's HTTP trace into its profile_export.jsonl line (`trace_data`, AIPerf's
    export shape; `--export-http-trace`), `show_trace_timing` adds the HTTP trace timing table
    to the console output (`--show-trace-timing`). `prefix` (AIPerf's `--profile-export-prefix`)
    also names every export `<prefix>.json`, `<prefix>.csv`, `<prefix>.jsonl`, `<prefix>_raw.jsonl`,
    `<prefix>_timeslices.*`, `<prefix>_console.txt`, `<prefix>_gpu_telemetry.jsonl`,
    `<prefix>_server_metrics.*` (`prefixed_exports`): hard links to the standard names, which stay
    (the results server, plots and Kubernetes harvest read those)."""

    dir: Annotated[str, Meta(min_length=1)] = "artifacts"
    prefix: Annotated[str, Meta(min_length=1, max_length=200, pattern=r"^[^/\\\s]+$")] | None = None
    keep_dataset: bool = False
    export_level: ExportLevel = "records"
    trace: bool = False
    show_trace_timing: bool = False
    auto_plot: bool = False
    plot_required: bool = False
    slice_duration: PositiveFloat | None = None
    user_files: list[UserFile] = []

    def __post_init__(self) -> None:
        if self.plot_required and not self.auto_plot:
            raise ValueError("plot_required: needs auto_plot")
        if self.prefix is not None and (any(c in "/\\" or c.isspace() for c in self.prefix)):
            raise ValueError(f"prefix {self.prefix!r}: a file name base, without / or spaces (e.g. run1)")
        if self.prefix is not None and not prefix_base(self.prefix):
            raise ValueError(f"prefix {self.prefix!r}: nothing left once the export suffix is taken off")


PREFIXED_EXPORTS = {
    "profile_export_aiperf.json": ".json", "profile_export_aiperf.csv": ".csv", "profile_export.jsonl": ".jsonl",
    "profile_export_raw.jsonl": "_raw.jsonl", "profile_export_aiperf_timeslices.json": "_timeslices.json",
    "profile_export_aiperf_timeslices.csv": "_timeslices.csv", "profile_export_console.txt": "_console.txt",
    "gpu_telemetry_export.jsonl": "_gpu_telemetry.jsonl", "server_metrics_export.json": "_server_metrics.json",
    "server_metrics_export.csv": "_server_metrics.csv", "server_metrics_export.jsonl": "_server_metrics.jsonl",
}
"""Each standard export file name and the suffix its `--profile-export-prefix` name takes (AIPerf 0.13.0's)."""

_PREFIX_SUFFIXES = ("_server_metrics.parquet", "_server_metrics.jsonl", "_server_metrics.json", "_server_metrics.csv",
                    "_network_latency.jsonl", "_gpu_telemetry.jsonl", "_timeslices.csv", "_timeslices.json",
                    "_console.txt", "_raw.jsonl", ".parquet", ".csv", ".json", ".jsonl")


def prefix_base(prefix: str) -> str:
    """`prefix` less one known export suffix (AIPerf's: `run1_raw.jsonl` and `run1.json` are `run1`)."""
    for suffix in _PREFIX_SUFFIXES:
        if prefix.endswith(suffix):
            return prefix[: -len(suffix)]
    return prefix


def prefixed_exports(prefix: str) -> dict[str, str]:
    """Standard export name -> its name under `prefix` (`PREFIXED_EXPORTS`)."""
    base = prefix_base(prefix)
    return {name: base + suffix for name, suffix in PREFIXED_EXPORTS.items()}


ServerMetricsFormat = Literal["json", "csv"]


class ServerMetrics(_Spec, frozen=True, kw_only=True):
    """Scraping the inference server's Prometheus metrics (AIPerf 0.13's `--server-metrics`,
    on by default): `urls` are extra endpoints (a URL without a path gets `/metrics`), scraped
    with the server's own `/metrics`; `enabled: false` is `--no-server-metrics`; `formats` the
    export files written (`server_metrics_export.json`/`.csv`); `interval` the seconds between
    scrapes while a phase runs."""

    enabled: bool = True
    urls: list[str] = []
    formats: Annotated[list[ServerMetricsFormat], Meta(min_length=1)] = msgspec.field(
        default_factory=lambda: ["json", "csv"])
    interval: PositiveFloat = 0.5


class GpuTelemetry(_Spec, frozen=True, kw_only=True):
    """GPU telemetry from DCGM exporter endpoints (AIPerf 0.13's `gpu_telemetry`, on by default):
    each endpoint's Prometheus metrics are scraped while the run lasts (every
    `AIPERF_GPU_COLLECTION_INTERVAL` s, 0.333 by default), per GPU, into
    `gpu_telemetry_export.jsonl` and the `telemetry_data` of `profile_export_aiperf.json`/`.csv`.
    Besides `urls` (a URL without a path gets `/metrics`) AIPerf's defaults are tried,
    `http://localhost:9400/metrics` and `:9401` (`AIPERF_GPU_DEFAULT_DCGM_ENDPOINTS`), and kept
    when they answer at the start; `enabled: false` is `--no-gpu-telemetry`."""

    enabled: bool = True
    urls: list[str] = []


PerPod = Annotated[int, Meta(ge=1, le=256)]


Aggregation = Literal["records", "sharded"]
"""How metric records reach the records-manager (`Runtime.aggregation`)."""


class Runtime(_Spec, frozen=True, kw_only=True):
    """Processes of a run: `workers` (local: None is max(1, min(0.75 x CPUs - 1, 32)), at most
    the concurrency; in a cluster: the total) and `record_processors` (None: workers / 4, at
    least 1); `ui` None picks dashboard on a terminal, none elsewhere. In a cluster only:
    `workers_per_pod` (None: 10), `record_processors_per_pod` (None: workers per pod / 4, at
    least 1) and `workers_min` (the run starts once this many workers are ready; None: all).
    `issuing`: who issues the credits: `central` (the timing-manager, per request: the
    default) or `per_pod` (each worker pod's worker-group-manager issues its own workers'
    credits from its slice of the plan and the timing-manager only coordinates the pods:
    docs/scale.md, "Sharded credit issuing").
    `aggregation` (ours, `--aggregation`): `records`, each record-processor sends its metric
    records in batches; `sharded`, each sends one `MetricShard` per phase at the end of the
    run (`docs/scale.md`, "Sharded aggregation"): the same exact results, far less work for
    the records-manager, but progress counts only what has been merged (it jumps at the end)
    and no timeslices."""

    workers: PositiveInt | None = None
    record_processors: PositiveInt | None = None
    ui: Literal["none", "simple", "dashboard"] | None = None
    workers_per_pod: PerPod | None = None
    record_processors_per_pod: PerPod | None = None
    workers_min: PositiveInt | None = None
    issuing: Literal["central", "per_pod"] = "central"
    aggregation: Aggregation = "records"


ModelSelectionStrategy = Literal["round_robin", "random", "weighted"]
"""How each turn's model is chosen among several (AIPerf's `models.strategy`)."""


class ModelSelection(_Spec, frozen=True, kw_only=True):
    """How each request's model is chosen when the benchmark names several (AIPerf's
    `models: {strategy, items: [{name, weight}]}`). Chosen once per turn when the dataset is
    built, in conversation then turn order, so `inputs.json` shows it: `round_robin` gives the
    n-th turn model n mod len(models); `random` a uniform choice, `weighted` one with probability
    `weights[i]` (one weight per model, summing to 1 +/- 0.01), both from a generator seeded by
    the dataset's seed (reproducible; AIPerf's derivation for `random`)."""

    strategy: ModelSelectionStrategy = "round_robin"
    weights: list[Annotated[float, Meta(ge=0, le=1)]] = []


LogLevel = Literal["debug", "info", "warning", "error"]


class Logging(_Spec, frozen=True, kw_only=True):
    """The services' log level (None: `--log-level`, else warning locally and info in a cluster)."""

    level: LogLevel | None = None


class Benchmark(_Spec, frozen=True, kw_only=True):
    """One benchmark (AIPerf config v2's `benchmark:` body, the fields we support).

    Rules beyond single fields: one dataset; weights, when given, one per model; phases are an optional warmup followed
    by exactly one profiling phase with distinct names; a fixed-schedule phase needs a file
    dataset. `variables` are the config's (the envelope's `variables`, resolved), kept for the
    templates of `artifacts.user_files` only (the reader renders every other template)."""

    models: Annotated[list[ModelName], Meta(min_length=1)]
    model_selection: ModelSelection = ModelSelection()
    endpoint: Endpoint = Endpoint()
    datasets: Annotated[list[Dataset], Meta(min_length=1, max_length=1)] = msgspec.field(
        default_factory=one_item_list(SyntheticDataset()))
    phases: Annotated[list[Phase], Meta(min_length=1, max_length=2)] = msgspec.field(
        default_factory=one_item_list(ConcurrencyPhase(requests=10)))
    tokenizer: TokenizerSpec = TokenizerSpec()
    artifacts: Artifacts = Artifacts()
    slos: dict[GoodputMetric, PositiveFloat] = {}
    runtime: Runtime = Runtime()
    logging: Logging = Logging()
    random_seed: int | None = None
    server_metrics: ServerMetrics = ServerMetrics()
    gpu_telemetry: GpuTelemetry = GpuTelemetry()
    variables: dict[str, Any] = {}

    def __post_init__(self) -> None:
        weights = self.model_selection.weights
        if weights and len(weights) != len(self.models):
            raise ValueError(f"model_selection.weights: one per model ({len(self.models)}), got {len(weights)}")
        if self.model_selection.strategy == "weighted":
            if not weights:
                raise ValueError("model_selection.weights: the weighted strategy needs a weight for every model")
            if not 0.99 <= sum(weights) <= 1.01:
                raise ValueError(f"model_selection.weights: must sum to 1.0, got {sum(weights):g}")
        kinds = [p.role for p in self.phases]
        if kinds not in ([PhaseKind.PROFILING], [PhaseKind.WARMUP, PhaseKind.PROFILING]):
            raise ValueError("phases: an optional warmup phase, then one profiling phase "
                             f"(got {', '.join(map(str, kinds))})")
        if len({p.name.lower() for p in self.phases}) != len(self.phases):
            raise ValueError("phases: names must be distinct")
        if (any(isinstance(p, FixedSchedulePhase) for p in self.phases)
                and not isinstance(self.dataset, FileDataset)):
            raise ValueError("phases: fixed_schedule needs a file dataset with timestamps")
        if self.runtime.aggregation == "sharded" and self.artifacts.slice_duration is not None:
            raise ValueError("runtime.aggregation: sharded keeps no per-request times for timeslices; "
                             "drop slice_duration (--slice-duration) or aggregate records")

    @property
    def model(self) -> str:
        """The first model: the one sent when a turn names none (every request's, when the
        benchmark names one model)."""
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
