from __future__ import annotations

from aiperf.comms import Channel
from aiperf.config import CommsOptions, RunConfig
from aiperf.runtime import addressing_of


def test_local_runs_bind_ephemeral_tcp_ports_so_runs_never_collide() -> None:
    addressing = addressing_of(RunConfig(run_id="a", comms=CommsOptions(ipc_dir="/tmp/x")))
    assert addressing.bind_endpoints(Channel.CONTROL) == ["ipc:///tmp/x/control.ipc", "tcp://127.0.0.1:*"]


def test_kubernetes_runs_bind_the_fixed_ports() -> None:
    config = RunConfig(run_id="a", kubernetes=True, comms=CommsOptions(ipc_dir="/i", tcp_bind_host="0.0.0.0"))
    assert addressing_of(config).bind_endpoints(Channel.CREDITS)[1] == "tcp://0.0.0.0:5564"


def test_an_explicit_local_port_is_kept() -> None:
    config = RunConfig(run_id="a", comms=CommsOptions(ipc_dir="/i", ports={"records": 7000}))
    assert addressing_of(config).bind_endpoints(Channel.RECORDS)[1] == "tcp://127.0.0.1:7000"
