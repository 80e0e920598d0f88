"""The results sidecar of a run's controller pod: the finished run's exports, served after the control plane has exited."""
