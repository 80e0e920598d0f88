"""The `aiperf` command line."""
