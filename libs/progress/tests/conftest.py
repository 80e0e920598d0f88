"""Fixtures of the progress tests: none beyond hypothesis' own."""
