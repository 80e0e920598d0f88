"""Marker files the control plane leaves in the artifact directory for readers in other
processes (the results sidecar, `aiperf kube`, the operator). Both are written atomically
(temporary file, fsync, rename), so a reader sees a whole marker or none.

- `READY_MARKER` (`{"ready": true, "was_cancelled": bool, "partial": bool}`): the exports are
  final and balanced; written only for completed or cancelled runs.
- `END_MARKER` (`{"state": SystemState, "exit_code": int, "reason": str}`): the run is over and
  the system-controller exits with `exit_code`; written for every outcome, failures included,
  after the ready marker. A control plane that dies without writing it is seen as gone by its
  health port (the results sidecar) or by its container state (`aiperf kube`, the operator).
- `SERVER_METRICS_DONE_MARKER` (`{"exported": bool}`): the controller pod's server-metrics
  container has written its exports (Kubernetes; it runs beside the control plane and may finish
  after it, so the results sidecar waits for this marker before it serves the run's files).
- `SERVER_METRICS_READY_MARKER` (`{"ready": true}`): that container follows the event bus and took
  its baseline scrape (Kubernetes; the control plane waits for it before the first phase starts,
  so a container that came up late still sees the whole run).
"""

from __future__ import annotations

READY_MARKER = ".aiperf_results_ready.json"
END_MARKER = ".aiperf_run_ended.json"
SERVER_METRICS_DONE_MARKER = ".aiperf_server_metrics_done.json"
SERVER_METRICS_READY_MARKER = ".aiperf_server_metrics_ready.json"
SWEEP_AGGREGATE_FILES = ("aggregate.json", "profile_export_aiperf_sweep.json", "profile_export_aiperf_sweep.csv")
"""What an AIPerfSweep's sweep-controller leaves for the operator to harvest (its results sidecar
serves them): `aggregate.json` (every variation's aggregate, the sweep aggregate and the
children), and the sweep aggregate as AIPerf 0.13 writes it."""

__all__ = ["END_MARKER", "READY_MARKER", "SERVER_METRICS_DONE_MARKER", "SERVER_METRICS_READY_MARKER", "SWEEP_AGGREGATE_FILES"]
