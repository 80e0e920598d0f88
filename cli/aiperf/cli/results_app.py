"""`aiperf results ...`: stored results over HTTP, on a workstation (the results-server service,
run in this process by its catalog name, as `aiperf service` runs a service)."""

from __future__ import annotations

from typing import Annotated, Literal

import cyclopts
from cyclopts import Parameter

results_app = cyclopts.App(
    name="results",
    help="Serve stored results (a local artifact tree, or a copy of the operator's results volume) over HTTP.",
)


@results_app.command
def serve(directory: str, *, port: int = 8081, host: str = "127.0.0.1",
          layout: Annotated[Literal["auto", "volume", "local"], Parameter(name="--layout")] = "auto",
          kubeconfig: str | None = None) -> int:
    """Serve DIRECTORY's runs: the JSON API `GET /api/v1/results`, `.../<ns>/<name>/runs`,
    `.../runs/<epoch>`, `.../runs/<epoch>.zip`, `.../runs/<epoch>/<file>` (and the dashboard when
    installed) until Ctrl-C.

    A local tree (`aiperf results serve artifacts/` after `aiperf demo`) lists each folder
    holding profile_export_aiperf.json as a run of job `local/<name>`: `artifacts/demo/`,
    repeated runs `artifacts/NAME/profile_runs/trial_000N/`, sweeps
    `.../trial_000N/<label>/` (job `NAME.<label>`). An operator results volume
    (`<ns>/<name>/<epoch>/` with `.aiperf_index.sqlite`) is served through its index.

    Parameters
    ----------
    directory
        The artifact directory or results volume.
    port
        TCP port (0: a free one).
    host
        Address to listen on (0.0.0.0: every interface).
    layout
        auto (detect), volume (operator layout) or local (artifact tree).
    kubeconfig
        A kubeconfig (its current context): the dashboard's job pages then follow AIPerfJobs
        live (`/api/v1/jobs/<ns>/<name>/status` and its WebSocket), as in the operator.
    """
    import importlib
    from pathlib import Path

    from aiperf.config.catalog import RESULTS_SERVER

    server = importlib.import_module(RESULTS_SERVER.module)
    code: int = server.run_server(Path(directory), host=host, port=port, layout=layout, kubeconfig=kubeconfig)
    return code
