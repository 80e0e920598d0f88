"""Base class and shared enums of every wire message.

Contract: messages are frozen, tagged msgspec Structs. A new field is always appended with a
default, and decoders never forbid unknown fields, so an older reader skips newer fields.
"""

from __future__ import annotations

import enum

import msgspec


class Message(msgspec.Struct, frozen=True, tag_field="kind", tag=str.lower, kw_only=True):
    """Base of every wire message; the class name, lowercased, is its tag."""


class ServiceType(enum.StrEnum):
    """The nine services of a run."""

    SYSTEM_CONTROLLER = "system-controller"
    EVENT_BUS_PROXY = "event-bus-proxy"
    DATASET_MANAGER = "dataset-manager"
    TIMING_MANAGER = "timing-manager"
    RECORDS_MANAGER = "records-manager"
    API = "api"
    WORKER_GROUP_MANAGER = "worker-group-manager"
    WORKER = "worker"
    RECORD_PROCESSOR = "record-processor"


class ServiceState(enum.StrEnum):
    """Lifecycle of one service process."""

    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"


class SystemState(enum.StrEnum):
    """State machine of a whole run, driven by the system-controller."""

    INITIALIZING = "initializing"
    CONFIGURING = "configuring"
    READY = "ready"
    PROFILING = "profiling"
    PROCESSING = "processing"
    EXPORTING = "exporting"
    STOPPING = "stopping"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Phase(enum.StrEnum):
    """Credit phases: warmup requests are sent first and excluded from the results."""

    WARMUP = "warmup"
    PROFILING = "profiling"
