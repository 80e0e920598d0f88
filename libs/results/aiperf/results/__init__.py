"""Stored benchmark results: the operator volume's layout and SQLite index
(`aiperf.results.index`), a local artifact tree as a source (`aiperf.results.local`), and the
results server's HTTP app (`aiperf.results.app`) with its entry point
(`python -m aiperf.results serve`)."""
