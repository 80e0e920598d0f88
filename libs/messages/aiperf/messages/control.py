"""The `control` channel: services (DEALER) <-> system-controller (ROUTER).

Services send `ToController` messages; the controller sends `ToService` commands. A command
`Command[R]` is answered by exactly one reply carrying its `request_id`: an `R` when it was
carried out, a `CommandFailed` when not (the handler's exception, or a command the service does
not know). docs/run-protocol.md lists who receives which command and when.
"""

from __future__ import annotations

from typing import ClassVar, Generic, TypeVar

import msgspec

from aiperf.messages.base import Message, Phase, ServiceState, ServiceType


class Register(Message, frozen=True, kw_only=True):
    """First message of a service: who it is, and where it runs."""

    service_id: str
    service_type: ServiceType
    pid: int
    host: str = ""
    group_id: str = ""


class Heartbeat(Message, frozen=True, kw_only=True):
    """Periodic liveness signal; `state` is the sender's current lifecycle state."""

    service_id: str
    state: ServiceState
    sent_at_ns: int = 0


class ServiceStatus(Message, frozen=True, kw_only=True):
    """A lifecycle transition, sent when it happens (not only on the next heartbeat)."""

    service_id: str
    state: ServiceState
    error: str = ""


# -- replies ----------------------------------------------------------------------------------

class Reply(Message, frozen=True, kw_only=True):
    """Base of every answer to a command: which request it answers and who answers. A service's
    handler returns the reply without them; the control client stamps both before sending."""

    request_id: str = ""
    service_id: str = ""


class Ack(Reply, frozen=True, kw_only=True):
    """The command was carried out; nothing to report."""


class CommandFailed(Reply, frozen=True, kw_only=True):
    """The command was not carried out: `error` says why; `error_type` is the exception's class
    name (`UserError` marks a user mistake, `UnknownCommand` a command the service lacks)."""

    error: str
    error_type: str = ""


class DatasetBuilt(Reply, frozen=True, kw_only=True):
    """The dataset files are written under `dataset_dir`."""

    dataset_dir: str
    conversations: int


class GroupReady(Reply, frozen=True, kw_only=True):
    """The dataset is readable inside worker group `group_id` at `dataset_dir` (the pod's own copy
    in Kubernetes); `members` are the group's workers and record-processors."""

    dataset_dir: str
    group_id: str
    members: list[str]
    conversations: int


class PhaseAccounting(msgspec.Struct, frozen=True, kw_only=True):
    """Where every credit of one phase went, as the timing-manager counted it. Balanced when
    `issued == ok + failed + cancelled + lost` and `returned + lost == issued`."""

    issued: int = 0
    """Credits issued to workers."""
    returned: int = 0
    """Credits their workers gave back, each `ok`, `failed` or `cancelled`."""
    sent: int = 0
    """Returned credits whose request left the worker (one cancelled before its send did not)."""
    ok: int = 0
    failed: int = 0
    cancelled: int = 0
    """How the returned credits ended, as their workers saw the exchange (`ok`: no transport
    error, status < 400; `cancelled`: the request was cancelled before it ended)."""
    lost: int = 0
    """Credits written off with their lost worker (never returned)."""
    start_ns: int = 0
    end_ns: int = 0
    """When the phase started issuing and when its last credit was settled: the timing-manager's
    `perf_counter_ns`."""
    start_wall_ns: int = 0
    end_wall_ns: int = 0
    """The same two moments on the wall clock (`time.time_ns`)."""
    schedule_lag_p50_ns: int = 0
    schedule_lag_p99_ns: int = 0
    """How late scheduled credits (rate and trace phases) were issued after their planned time:
    the median and the 99th percentile; 0 when none was scheduled."""
    stopped_reason: str = ""
    """Set only when issuing ended early for a reason other than the plan (cancelled, no workers
    left)."""


class RunAccounting(msgspec.Struct, frozen=True, kw_only=True):
    """The accounting of a whole run, per phase in the order they ran. `cancelled`: the run was
    cancelled (`ProfileCancel`); `stopped_reason`: the last phase's early-stop reason, if any."""

    phases: dict[Phase, PhaseAccounting] = {}
    cancelled: bool = False
    stopped_reason: str = ""


class ProfileFinished(Reply, frozen=True, kw_only=True):
    """Every credit of every phase came back or was declared lost."""

    accounting: RunAccounting


class CreditsLost(Reply, frozen=True, kw_only=True):
    """`lost` credits in flight at the lost worker were written off."""

    lost: int


class Finalized(Reply, frozen=True, kw_only=True):
    """The exports are written. `table` is the console table as text; `balanced` is false when
    the accounting does not add up (`problems` says how); `startup_s` is command start to first
    request (None when unknown); `files` are the export file names under `artifact_dir`.
    `accounting`: the run's accounting as exported, where `ok` counts valid responses only (the
    `Finalize` accounting with each response error moved from ok to failed); None from an older
    records-manager."""

    table: str
    accounting_line: str
    balanced: bool
    problems: list[str] = []
    overhead_line: str = ""
    startup_s: float | None = None
    request_count: int = 0
    error_request_count: int = 0
    artifact_dir: str = ""
    files: list[str] = []
    accounting: RunAccounting | None = None


class RawRecordsFlushed(Reply, frozen=True, kw_only=True):
    """A record-processor's raw records are durable at `path` (fsynced, renamed from their
    staging name): `size` bytes, `records` lines. `path` is "" when it received no record."""

    path: str = ""
    size: int = 0
    records: int = 0


class ShardsSent(Reply, frozen=True, kw_only=True):
    """A record-processor queued its `MetricShard`s (`shards` of them, standing for `records`
    metric records) on its `records` socket, ahead of anything it sends later."""

    shards: int = 0
    records: int = 0


class RawPart(msgspec.Struct, frozen=True, kw_only=True):
    """One record-processor's raw part: its file `name` (`<service id>.jsonl`), `size` bytes,
    `records` lines. In `UploadRawRecords`, `path` is where it lies in the worker pod."""

    name: str
    size: int
    records: int = 0
    path: str = ""


class RawRecordsUploaded(Reply, frozen=True, kw_only=True):
    """A worker-group-manager uploaded its group's raw parts to the controller's api: each
    part's `size` is the byte count the api acknowledged receiving (equal to what was sent,
    or the upload would have failed)."""

    parts: list[RawPart] = []


# -- commands ---------------------------------------------------------------------------------

R = TypeVar("R", bound=Reply)


class Command(Message, Generic[R], frozen=True, kw_only=True):
    """Base of every command; `reply` is the type of its successful answer."""

    reply: ClassVar[type[Reply]] = Ack
    request_id: str


class Shutdown(Command[Ack], frozen=True, kw_only=True):
    """Stop gracefully and exit 0 (answered before stopping)."""

    reason: str = ""


class BuildDataset(Command[DatasetBuilt], frozen=True, kw_only=True):
    """dataset-manager: build the run's dataset and write its files."""

    reply = DatasetBuilt


class PrepareGroup(Command[GroupReady], frozen=True, kw_only=True):
    """worker-group-manager: make the dataset at `dataset_dir` readable in the group (Kubernetes:
    download it once per pod, from `dataset_url` when given, else the controller's api)."""

    reply = GroupReady
    dataset_dir: str
    dataset_url: str = ""


class ProfileConfigure(Command[Ack], frozen=True, kw_only=True):
    """Every other service: prepare for the run with the group's dataset at `dataset_dir`."""

    dataset_dir: str


class ProfileStart(Command[ProfileFinished], frozen=True, kw_only=True):
    """timing-manager: run every phase; answered when all credits are settled."""

    reply = ProfileFinished


class ProfileCancel(Command[Ack], frozen=True, kw_only=True):
    """timing-manager: stop the benchmark early; in-flight requests are cancelled."""

    reason: str = ""


class WorkerLost(Command[CreditsLost], frozen=True, kw_only=True):
    """timing-manager: `worker_id` is gone; write off its credits, give it no more."""

    reply = CreditsLost
    worker_id: str


class Finalize(Command[Finalized], frozen=True, kw_only=True):
    """records-manager: wait (bounded) for one record per returned credit, then write the exports.
    `lost_groups` are worker groups lost with their pod (their records may be missing);
    `records_timeout_s` None is the records-manager's default wait."""

    reply = Finalized
    accounting: RunAccounting
    was_cancelled: bool = False
    lost_groups: list[str] = []
    records_timeout_s: float | None = None


class FlushRawRecords(Command[RawRecordsFlushed], frozen=True, kw_only=True):
    """record-processor (`--export-level raw`), once the records-manager has every record:
    make the raw records written so far durable and say where and how big."""

    reply = RawRecordsFlushed


class SendShards(Command[ShardsSent], frozen=True, kw_only=True):
    """record-processor (`runtime.aggregation: sharded`), once the profiling ended and before the
    records-manager's `Finalize`: queue one `MetricShard` per phase for the records taken so far
    on its `records` socket, then answer; records that reach it later go in
    `MetricRecordBatch`es."""

    reply = ShardsSent


class UploadRawRecords(Command[RawRecordsUploaded], frozen=True, kw_only=True):
    """worker-group-manager (Kubernetes, `--export-level raw`), once its group's record-processors
    flushed: upload each of `parts` (their `RawRecordsFlushed` answers) to the controller's api
    at `upload_url` (default: the api named by the pod's environment)."""

    reply = RawRecordsUploaded
    parts: list[RawPart] = []
    upload_url: str = ""


ToController = (Register | Heartbeat | ServiceStatus | Ack | CommandFailed | DatasetBuilt | GroupReady
                | ProfileFinished | CreditsLost | Finalized | RawRecordsFlushed | RawRecordsUploaded | ShardsSent)
ToService = (Shutdown | BuildDataset | PrepareGroup | ProfileConfigure | ProfileStart | ProfileCancel
             | WorkerLost | Finalize | FlushRawRecords | UploadRawRecords | SendShards)
Replies = (Ack | CommandFailed | DatasetBuilt | GroupReady | ProfileFinished | CreditsLost | Finalized
           | RawRecordsFlushed | RawRecordsUploaded | ShardsSent)
