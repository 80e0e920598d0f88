"""The results server: stored runs over HTTP (the runs API and the dashboard), in the operator's pod over its results volume, or on a workstation over an artifact tree (`aiperf results serve`)."""
