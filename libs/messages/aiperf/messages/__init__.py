"""Wire messages of every aiperf channel: frozen, tagged msgspec Structs, one union per channel.

This package imports only msgspec (enforced by tests/architecture).
"""

from aiperf.messages.base import Message, Phase, ServiceState, ServiceType, SystemState
from aiperf.messages.control import (
    Command,
    CommandReply,
    Heartbeat,
    ProfileCancel,
    ProfileConfigure,
    ProfileStart,
    Register,
    ServiceCommand,
    ServiceStatus,
    Shutdown,
    ToController,
    ToService,
)
from aiperf.messages.credits import (
    CancelCredits,
    Credit,
    CreditChannel,
    CreditReturn,
    CreditReturnChannel,
    CreditUpstream,
    FirstToken,
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
from aiperf.messages.records import (
    ErrorDetails,
    MetricRecord,
    RawRecordChannel,
    RecordChannel,
    RequestRecord,
)

__all__ = [
    "CancelCredits", "Command", "CommandReply", "Credit", "CreditChannel", "CreditReturn",
    "CreditReturnChannel", "CreditUpstream", "DatasetConfigured", "ErrorDetails", "Event",
    "FirstToken", "Heartbeat", "Message", "MetricRecord", "Phase", "PhaseComplete",
    "PhaseSendingComplete", "PhaseStarted", "ProfileCancel", "ProfileConfigure", "ProfileStart",
    "Progress", "RawRecordChannel", "RealtimeMetrics", "RecordChannel", "Register",
    "RequestRecord", "ServiceCommand", "ServiceFailed", "ServiceState", "ServiceStatus",
    "ServiceType", "Shutdown", "SystemState", "SystemStateChanged", "TimePing", "TimePong",
    "ToController", "ToService", "WorkerConnected", "WorkerGroupReady", "WorkerLeaving",
    "topic_of",
]
