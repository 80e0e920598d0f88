"""Where each channel lives: IPC paths inside one pod or machine, TCP ports across pods.

Binders bind both (dual bind); connectors use TCP when `AIPERF_CONTROLLER_HOST` is set, IPC
otherwise. Locally the TCP side binds 127.0.0.1 on ephemeral ports so runs never collide.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field

CONTROLLER_HOST_ENV = "AIPERF_CONTROLLER_HOST"


class Channel(enum.Enum):
    """A named channel and its default TCP port (0: IPC only)."""

    CONTROL = ("control", 5667)
    EVENT_BUS_FRONTEND = ("event_bus_frontend", 5663)
    EVENT_BUS_BACKEND = ("event_bus_backend", 5664)
    CREDITS = ("credits", 5564)
    CREDIT_RETURNS = ("credit_returns", 5565)
    RECORDS = ("records", 5557)
    RAW_RECORDS = ("raw_records", 0)
    PODS = ("pods", 5566)

    def __init__(self, label: str, default_port: int) -> None:
        self.label = label
        self.default_port = default_port


@dataclass(frozen=True, kw_only=True)
class Addressing:
    """Bind and connect addresses of every channel.

    `ipc_dir` holds the IPC socket files. `tcp_bind_host` is the interface binders listen on
    (None: IPC only). `controller_host` is where connectors find the controller pod over TCP
    (None: use IPC). `ports` overrides default TCP ports; a port of 0 binds an ephemeral port.
    """

    ipc_dir: str
    tcp_bind_host: str | None = None
    controller_host: str | None = None
    ports: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_env(cls, *, ipc_dir: str, tcp_bind_host: str | None = None,
                 ports: dict[str, int] | None = None) -> Addressing:
        """Addressing whose connect side follows `AIPERF_CONTROLLER_HOST`."""
        host = os.environ.get(CONTROLLER_HOST_ENV) or None
        return cls(ipc_dir=ipc_dir, tcp_bind_host=tcp_bind_host, controller_host=host,
                   ports=dict(ports or {}))

    def port(self, channel: Channel) -> int:
        """The TCP port of `channel` (0 means ephemeral)."""
        return self.ports.get(channel.label, channel.default_port)

    def ipc(self, channel: Channel, index: int | str | None = None) -> str:
        """The IPC endpoint of `channel` (`index` tells per-instance channels apart)."""
        suffix = "" if index is None else f"-{index}"
        return f"ipc://{self.ipc_dir}/{channel.label}{suffix}.ipc"

    def bind_endpoints(self, channel: Channel, index: int | str | None = None) -> list[str]:
        """Endpoints a binder of `channel` binds: IPC always, TCP when enabled and ported."""
        endpoints = [self.ipc(channel, index)]
        if self.tcp_bind_host is not None and channel.default_port:
            port = self.port(channel)
            endpoints.append(f"tcp://{self.tcp_bind_host}:{port if port else '*'}")
        return endpoints

    def pod_local(self, channel: Channel, group_id: str) -> str:
        """The IPC endpoint of `channel` inside worker pod (group) `group_id`: with per-pod
        issuing (`runtime.issuing: per_pod`) the group's worker-group-manager binds `credits`
        and `credit_returns` here and the group's workers connect here, never over TCP (in
        Kubernetes the pod's containers share the IPC folder)."""
        return self.ipc(channel, index=f"pod-{group_id or 'g0'}")

    def connect_endpoint(self, channel: Channel, index: int | str | None = None) -> str:
        """The one endpoint a connector of `channel` uses."""
        if self.controller_host and channel.default_port:
            return f"tcp://{self.controller_host}:{self.port(channel)}"
        return self.ipc(channel, index)
