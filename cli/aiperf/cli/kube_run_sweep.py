"""A sweep (`RunRef`): the AIPerfSweep NAME. Cancel and delete act on the sweep (the operator
and its sweep-controller cancel the children); results are the sweep's aggregate; logs are the
sweep-controller's; show renders the sweep; attach and debug follow the child running now (name
another with `-v/-t`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

from aiperf.cli.kube_attach import Renderer
from aiperf.cli.kube_pods import LogsOptions, ResultsOptions
from aiperf.cli.kube_run_direct import DirectRun
from aiperf.cli.kube_run_job import OperatorJob, resolve_job
from aiperf.cli.kube_shared import EXIT_FAILED, EXIT_OK, EXIT_USER_ERROR, error
from aiperf.cli.kube_show import Format, show_sweep
from aiperf.config.catalog import SWEEP_CONTROLLER
from aiperf.config.markers import SWEEP_AGGREGATE_FILES
from aiperf.kube.names import JOBSET_NAME_LABEL, sweep_object_name
from aiperf.kubeapi import PODS, KubeApi, KubeError, Obj, uid_of
from aiperf.kuberun import direct, sidecar
from aiperf.kuberun.jobs import TERMINAL_PHASES
from aiperf.kuberun.sweeps import SWEEPS, cancel_cr, delete_sweep, sweep_phase


class OperatorSweep:
    """The AIPerfSweep `sweep` (as read) of `namespace` (see the module doc)."""

    def __init__(self, api: KubeApi, namespace: str, sweep: Obj) -> None:
        self.api, self.namespace, self.sweep = api, namespace, sweep
        self.name = str(sweep["metadata"]["name"])
        self.status: Obj = sweep.get("status") or {}

    async def cancel(self) -> int:
        """Set the sweep's `spec.cancel` (UID-fenced): its current child is cancelled, no other starts."""
        if sweep_phase(self.sweep) in {p.value for p in TERMINAL_PHASES}:
            print(f"sweep {self.name} already {sweep_phase(self.sweep)}; nothing to cancel")
            return EXIT_OK
        if not await cancel_cr(self.api, SWEEPS, self.sweep):
            error(f"AIPerfSweep {self.name} was deleted or replaced meanwhile")
            return EXIT_FAILED
        print(f"cancelled sweep {self.name}: spec.cancel is true on AIPerfSweep {self.namespace}/{self.name}; its "
              "current child is cancelled and no other starts")
        return EXIT_OK

    async def delete(self, uid: str | None) -> int:
        """Delete the AIPerfSweep (UID precondition): the operator cancels its children first;
        garbage collection removes them and its JobSet."""
        if uid is not None and uid_of(self.sweep) != uid:
            error(f"AIPerfSweep {self.name} is now uid {uid_of(self.sweep)}, not {uid}; nothing deleted")
            return EXIT_FAILED
        if not await delete_sweep(self.api, self.sweep):
            error(f"AIPerfSweep {self.name} was deleted or replaced meanwhile")
            return EXIT_FAILED
        print(f"deleted AIPerfSweep {self.namespace}/{self.name}; its children and sweep-controller go with it")
        return EXIT_OK

    async def results(self, options: ResultsOptions) -> int:
        """The sweep aggregate: once harvested it is on the operator's results volume (its path
        printed); before that it is downloaded from the sweep-controller's results sidecar into
        ARTIFACT_DIR/NAME/. Exit 1 while there is no aggregate yet."""
        if self.status.get("resultsAvailable"):
            print(f"sweep {self.name} {self.status.get('phase')}: aggregate stored by the operator under "
                  f"{self.status.get('resultsPath')} (run epoch {self.status.get('runEpoch')}); a child's results: "
                  f"`aiperf kube results {self.name} --kind sweep -v VARIATION -t TRIAL --from-pods`")
            return EXIT_OK
        if (self.status.get("aggregation") or {}).get("phase") != "Complete":
            error(f"sweep {self.name} has no aggregate yet ({self.status.get('phase') or 'Pending'}, "
                  f"{self.status.get('completedRuns') or 0}/{self.status.get('totalRuns') or '?'} runs)")
            return EXIT_FAILED
        pod = await self._controller_pod()
        if pod is None:
            error(f"the sweep-controller pod of {self.name} is gone; the operator is harvesting the aggregate")
            return EXIT_FAILED
        dest = Path(options.artifact_dir) / self.name
        dest.mkdir(parents=True, exist_ok=True)
        for file_name in SWEEP_AGGREGATE_FILES:
            await sidecar.download_export(self.api, self.namespace, pod, file_name, dest)
        print(f"sweep aggregate: {dest}/ ({', '.join(SWEEP_AGGREGATE_FILES)}) from pod {pod}")
        return EXIT_OK

    async def logs(self, options: LogsOptions) -> int:
        """The sweep-controller's log (or another container or pod of the sweep)."""
        pod = options.pod or await self._controller_pod()
        if pod is None:
            raise KubeError(f"no sweep-controller pod of sweep {self.name} in namespace {self.namespace}; it is gone "
                            "once the operator harvested the aggregate")
        container = options.container if options.container is not None or options.pod is not None \
            else SWEEP_CONTROLLER.name
        sys.stdout.write(await direct.pod_logs(self.api, pod, self.namespace, container=container, tail=options.tail))
        return EXIT_OK

    async def attach(self, renderer: Renderer, interval: float) -> int:
        """Follow the child running now."""
        return await (await self.current_child()).attach(renderer, interval)

    async def show(self, fmt: Format) -> int:
        """The sweep rendered (or as stored)."""
        return show_sweep(self.sweep, fmt)

    async def debug(self, fmt: Literal["text", "json"]) -> int:
        """What blocks the child running now."""
        return await (await self.current_child()).debug(fmt)

    async def shutdown(self) -> int:
        """Nothing to retire by hand: the operator deletes the sweep's JobSet once it harvested it."""
        error(f"the pods of sweep {self.name} are retired by the operator once it harvested the aggregate; "
              f"`-v VARIATION -t TRIAL` names one child run to shut down")
        return EXIT_USER_ERROR

    async def current_child(self) -> OperatorJob | DirectRun:
        """The child running now; KubeError when the sweep runs none."""
        current = self.status.get("currentChild")
        if not current:
            raise KubeError(f"sweep {self.name} runs no child now; name one with -v VARIATION -t TRIAL")
        return await resolve_job(self.api, self.namespace, str(current))

    async def _controller_pod(self) -> str | None:
        """The newest pod of the sweep's JobSet, None when there is none."""
        pods = (await self.api.list_all(PODS, self.namespace,
                                        label_selector=f"{JOBSET_NAME_LABEL}={sweep_object_name(self.name)}")).items
        return str(pods[-1]["metadata"]["name"]) if pods else None


__all__ = ["OperatorSweep"]
