"""The server-metrics manager of a run's controller pod: scrapes the inference server in-cluster around each phase."""
