"""Wire messages of every aiperf channel: frozen, tagged msgspec Structs, one union per channel.

This package imports only msgspec (enforced by tests/architecture).
"""

from aiperf.messages.base import Message, Phase, ServiceState, ServiceType, SystemState
from aiperf.messages.control import (
    Ack,
    BuildDataset,
    Command,
    CommandFailed,
    CreditsLost,
    DatasetBuilt,
    Finalize,
    Finalized,
    FlushRawRecords,
    GroupReady,
    Heartbeat,
    PhaseAccounting,
    PrepareGroup,
    ProfileCancel,
    ProfileConfigure,
    ProfileFinished,
    ProfileStart,
    RawPart,
    RawRecordsFlushed,
    RawRecordsUploaded,
    Register,
    Replies,
    Reply,
    RunAccounting,
    SendShards,
    ServiceStatus,
    ShardsSent,
    Shutdown,
    ToController,
    ToService,
    UploadRawRecords,
    WorkerLost,
)
from aiperf.messages.credits import (
    CancelCredits,
    Credit,
    CreditAudit,
    CreditChannel,
    CreditReturn,
    CreditReturnChannel,
    CreditUpstream,
    FirstToken,
    HeldCredits,
    TimePing,
    TimePong,
    WorkerConnected,
    WorkerLeaving,
)
from aiperf.messages.events import (
    DatasetConfigured,
    Event,
    PhaseComplete,
    PhaseSendingComplete,
    PhaseStarted,
    Progress,
    RealtimeMetrics,
    ServiceFailed,
    SystemStateChanged,
    WorkerGroupReady,
    topic_of,
)
from aiperf.messages.load import LAG_BUCKETS, ClientLoad, lag_bucket, lag_bucket_upper_ns
from aiperf.messages.pods import (
    PodCancel,
    PodCounts,
    PodDownstream,
    PodHello,
    PodPhaseStart,
    PodReport,
    PodUpstream,
    PodWorkerLost,
)
from aiperf.messages.records import (
    ErrorDetails,
    HttpTrace,
    MetricRecord,
    MetricRecordBatch,
    RawRecordChannel,
    RequestRecord,
)
from aiperf.messages.shards import AggregateShard, ColumnBytes, MetricShard, RecordChannel

__all__ = [
    "PodCancel", "PodCounts", "PodDownstream", "PodHello", "PodPhaseStart", "PodReport", "PodUpstream",
    "PodWorkerLost",
    "LAG_BUCKETS", "ClientLoad", "lag_bucket", "lag_bucket_upper_ns",
    "Ack", "BuildDataset", "CancelCredits", "Command", "CommandFailed", "Credit", "CreditAudit", "CreditChannel",
    "CreditReturn", "CreditReturnChannel", "CreditUpstream", "CreditsLost", "DatasetBuilt",
    "DatasetConfigured", "ErrorDetails", "Event", "Finalize", "Finalized", "FirstToken", "FlushRawRecords", "GroupReady",
    "Heartbeat", "HeldCredits", "HttpTrace", "Message", "MetricRecord", "MetricRecordBatch", "Phase", "PhaseAccounting", "PhaseComplete",
    "PhaseSendingComplete", "PhaseStarted", "PrepareGroup", "ProfileCancel", "ProfileConfigure",
    "ProfileFinished", "ProfileStart", "Progress", "RawRecordChannel", "RealtimeMetrics",
    "RecordChannel", "Register", "Replies", "Reply", "RequestRecord", "RawPart", "RawRecordsFlushed", "RawRecordsUploaded", "RunAccounting",
    "SendShards", "ServiceFailed", "ServiceState", "ServiceStatus", "ServiceType", "ShardsSent", "Shutdown", "SystemState",
    "SystemStateChanged", "TimePing", "TimePong", "ToController", "ToService", "UploadRawRecords", "WorkerConnected",
    "WorkerGroupReady", "WorkerLeaving", "WorkerLost", "topic_of",
    # sharded aggregation (aiperf.messages.shards)
    "AggregateShard", "ColumnBytes", "MetricShard",
]
