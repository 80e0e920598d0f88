"""Bundled mock OpenAI-compatible LLM server: exact TTFT/ITL, error injection, shared counters.

Run it with ``python -m aiperf.mock_server.main --help`` (or ``aiperf mock-server``). The ASGI app is
:class:`MockApp`; :func:`aiperf.mock_server.main.main` is the CLI entry
point (not imported here, so ``python -m aiperf.mock_server.main`` runs it cleanly).
"""

from aiperf.mock_server.app import MockApp, PerfClock, app_from_env
from aiperf.mock_server.config import MockConfig
from aiperf.mock_server.stats import StatsBoard

__all__ = ["MockApp", "MockConfig", "PerfClock", "StatsBoard", "app_from_env"]
