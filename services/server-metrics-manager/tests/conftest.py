"""Fixtures of the server-metrics manager's tests: none beyond pytest's own."""
