"""Bind and connect endpoints, with and without AIPERF_CONTROLLER_HOST."""

from __future__ import annotations

import pytest

from aiperf.comms import CONTROLLER_HOST_ENV, Addressing, Channel


def test_without_controller_host_connectors_use_ipc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONTROLLER_HOST_ENV, raising=False)
    addressing = Addressing.from_env(ipc_dir="/tmp/run1", tcp_bind_host="0.0.0.0")
    assert addressing.controller_host is None
    assert addressing.bind_endpoints(Channel.CONTROL) == ["ipc:///tmp/run1/control.ipc",
                                                          "tcp://0.0.0.0:5667"]
    assert addressing.connect_endpoint(Channel.CONTROL) == "ipc:///tmp/run1/control.ipc"
    assert addressing.connect_endpoint(Channel.CREDITS) == "ipc:///tmp/run1/credits.ipc"


def test_empty_controller_host_means_ipc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONTROLLER_HOST_ENV, "")
    addressing = Addressing.from_env(ipc_dir="/tmp/run1")
    assert addressing.controller_host is None
    assert addressing.connect_endpoint(Channel.RECORDS) == "ipc:///tmp/run1/records.ipc"


def test_with_controller_host_connectors_use_tcp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONTROLLER_HOST_ENV, "aiperf-controller.ns.svc")
    addressing = Addressing.from_env(ipc_dir="/tmp/run1", tcp_bind_host="0.0.0.0",
                                     ports={"credits": 6000})
    assert addressing.controller_host == "aiperf-controller.ns.svc"
    assert addressing.connect_endpoint(Channel.CONTROL) == "tcp://aiperf-controller.ns.svc:5667"
    assert addressing.connect_endpoint(Channel.CREDITS) == "tcp://aiperf-controller.ns.svc:6000"
    assert addressing.bind_endpoints(Channel.CREDITS) == ["ipc:///tmp/run1/credits.ipc",
                                                          "tcp://0.0.0.0:6000"]


def test_ipc_only_channels_ignore_tcp_and_tell_instances_apart(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONTROLLER_HOST_ENV, "aiperf-controller")
    addressing = Addressing.from_env(ipc_dir="/tmp/run1", tcp_bind_host="0.0.0.0")
    assert addressing.bind_endpoints(Channel.RAW_RECORDS, 3) == ["ipc:///tmp/run1/raw_records-3.ipc"]
    assert addressing.connect_endpoint(Channel.RAW_RECORDS, 3) == "ipc:///tmp/run1/raw_records-3.ipc"


def test_ipc_only_when_no_tcp_bind_host_and_wildcard_for_port_zero() -> None:
    assert Addressing(ipc_dir="/r").bind_endpoints(Channel.EVENT_BUS_BACKEND) == [
        "ipc:///r/event_bus_backend.ipc"]
    ephemeral = Addressing(ipc_dir="/r", tcp_bind_host="127.0.0.1",
                           ports={"event_bus_backend": 0})
    assert ephemeral.bind_endpoints(Channel.EVENT_BUS_BACKEND) == [
        "ipc:///r/event_bus_backend.ipc", "tcp://127.0.0.1:*"]
    assert ephemeral.port(Channel.EVENT_BUS_FRONTEND) == 5663


def test_from_env_copies_the_ports_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONTROLLER_HOST_ENV, raising=False)
    ports = {"control": 7000}
    addressing = Addressing.from_env(ipc_dir="/r", tcp_bind_host="127.0.0.1", ports=ports)
    ports["control"] = 1
    assert addressing.bind_endpoints(Channel.CONTROL)[1] == "tcp://127.0.0.1:7000"
