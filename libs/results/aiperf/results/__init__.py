"""Stored benchmark results: the operator volume's layout and SQLite index
(`aiperf.results.index`), a local artifact tree as a source (`aiperf.results.local`), the
results HTTP app (`aiperf.results.app`) and the rules for serving export files
(`aiperf.results.files`). The process serving them is the results-server service."""
