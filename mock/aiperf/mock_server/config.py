"""The mock server's settings, and how they travel from the CLI process to granian workers.

Granian imports the ASGI app afresh in every worker process, so the supervisor (``main``) serialises
one :class:`MockConfig` into the environment variable :data:`CONFIG_ENV` and each worker decodes it
in :func:`aiperf.mock_server.app.app_from_env`.
"""

from __future__ import annotations

import os

import msgspec

CONFIG_ENV = "AIPERF_MOCK_SERVER_CONFIG"
"""Environment variable holding the JSON-encoded :class:`MockConfig` for worker processes."""

DEFAULT_MODEL = "aiperf-mock"


class MockConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a worker needs to answer requests; all durations are in milliseconds.

    ``output_tokens`` of ``None`` means "follow the request" (``max_completion_tokens``, then
    ``max_tokens``, else ``default_output_tokens``); an int forces that length for every request.
    ``stats_path`` names the shared counter file (see :mod:`aiperf.mock_server.stats`); ``None`` keeps
    counters private to the process, which is what in-process tests use. ``headers_delay_ms`` holds
    back the response headers (the first byte) of inference requests; ``close_connections`` answers
    with ``Connection: close`` so every request needs a fresh connection; ``wire_stats`` puts a
    byte-counting relay in front of the app (see :mod:`aiperf.mock_server.wire`), and
    ``app_port`` is then where the app itself listens. ``fault`` (a
    :class:`aiperf.mock_server.faults.Fault`) answers a ``fault_rate`` share of the inference
    requests the way a broken server would (``trickle_ms`` apart for a trickle).
    """

    host: str = "127.0.0.1"
    port: int = 8000
    ttft_ms: float = 0.0
    itl_ms: float = 0.0
    jitter_ms: float = 0.0
    output_tokens: int | None = None
    default_output_tokens: int = 64
    error_rate: float = 0.0
    workers: int = 1
    seed: int | None = None
    model: str = DEFAULT_MODEL
    embedding_dim: int = 768
    log_level: str = "warning"
    stats_path: str | None = None
    headers_delay_ms: float = 0.0
    close_connections: bool = False
    wire_stats: bool = False
    app_port: int = 0
    fault: str | None = None
    fault_rate: float = 1.0
    trickle_ms: float = 1000.0

    def to_env(self) -> str:
        """Encode for :data:`CONFIG_ENV`; the inverse of :meth:`from_env`."""
        return msgspec.json.encode(self).decode()

    @classmethod
    def from_env(cls, environ: os._Environ[str] | dict[str, str] | None = None) -> MockConfig:
        """Decode the config a supervisor placed in the environment.

        Raises ``KeyError`` when :data:`CONFIG_ENV` is unset and ``msgspec.ValidationError`` when it
        does not hold a valid config.
        """
        env = os.environ if environ is None else environ
        return msgspec.json.decode(env[CONFIG_ENV], type=cls)
