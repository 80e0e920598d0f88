"""The sweep-controller: runs an AIPerfSweep's plan as child AIPerfJobs (started by the operator)."""
