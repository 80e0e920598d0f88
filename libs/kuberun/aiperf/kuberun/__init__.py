"""What aiperf does with its runs in a cluster, over `aiperf.kubeapi`:

- `direct`: a direct-mode run's objects (create all or nothing, cancel by suspending the JobSet,
  delete UID-fenced, watch, pods and logs);
- `jobs`: AIPerfJob custom resources (operator mode); `sweeps`: AIPerfSweep ones and the
  executor of a sweep's children; `sweep_plan`: the pure planning under it;
- `sidecar`: the run's end and its results, read from the controller pod's results sidecar;
- `status_push`: the controller pod's half of its AIPerfJob's status.
"""
