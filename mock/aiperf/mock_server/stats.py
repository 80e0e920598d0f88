"""Request counters shared by all granian worker processes, read by ``/stats`` and ``/metrics``.

Layout: a file of ``rows`` rows, one per worker, each ``ROW_LEN`` signed 64-bit slots. Slot 0 holds
the owning worker's pid; the rest are the counters named by :class:`Counter` and the
``endpoint x status`` request matrix. A worker claims a row once (under ``flock``) and afterwards
writes only to its own row, so the hot path is a lock-free ``+= 1`` on a memory-mapped integer.
Readers sum all rows; a sum may be a few increments stale while requests are in flight, but it is
exact once the server is idle, which is when tests compare.
"""

from __future__ import annotations

import enum
import fcntl
import mmap
import os
from types import TracebackType
from typing import Self

from aiperf.endpoints.catalog import CATALOG
from aiperf.mock_server.vllm_metrics import VllmSlots

ENDPOINTS: tuple[str, ...] = (*(spec.path for spec in CATALOG), "/v1/models", "/health", "/metrics", "/stats", "other")
"""Endpoint labels of ``mock_requests_total``: the inference routes (one per endpoint kind of
`aiperf.endpoints.catalog`, in its order), the others, and ``other`` for every unknown path."""

STATUSES: tuple[int, ...] = (200, 400, 404, 405, 500)
"""Status labels of ``mock_requests_total``: every status the mock can answer."""


class Counter(enum.IntEnum):
    """Scalar counters; the value is the slot index within a row (slot 0 is the pid)."""

    INFERENCE_REQUESTS = 1  # chat/completions/embeddings requests with a well-formed body
    INJECTED_ERRORS = 2
    BAD_REQUESTS = 3
    OUTPUT_TOKENS = 4
    PROMPT_TOKENS = 5
    IN_FLIGHT = 6  # a gauge: +1 on admission, -1 when the response ends
    COMPLETED = 7  # inference responses fully sent
    DISCONNECTS = 8  # streams cut short because the client went away
    WIRE_BYTES_IN = 9  # --wire-stats: bytes clients sent on inference connections
    WIRE_BYTES_OUT = 10  # --wire-stats: bytes clients received on inference connections
    WIRE_CONNECTIONS = 11  # --wire-stats: inference connections opened


_MATRIX_BASE = len(Counter) + 1
VLLM = VllmSlots(_MATRIX_BASE + len(ENDPOINTS) * len(STATUSES))
"""The vLLM-style counters and histograms (`aiperf.mock_server.vllm_metrics`), after the matrix."""
ROW_LEN = VLLM.base + VLLM.width
_SLOT = 8


def request_slot(endpoint: int, status: int) -> int:
    """Slot index of the ``(endpoint index, HTTP status)`` cell; unknown statuses map to 500."""
    try:
        col = STATUSES.index(status)
    except ValueError:
        col = STATUSES.index(500)
    return _MATRIX_BASE + endpoint * len(STATUSES) + col


class StatsBoard:
    """One worker's view of the counter file: writes go to its own row, reads sum every row.

    Use :meth:`create` in the supervisor (makes the file), :meth:`attach` in a worker (claims a row)
    and :meth:`private` for a single in-process board without a file. Close with :meth:`close` or
    ``with``; closing never deletes the file (the supervisor does, see :meth:`unlink`).
    """

    def __init__(self, *, buffer: mmap.mmap | bytearray, rows: int, row: int) -> None:
        self._buffer = buffer
        self._view = memoryview(buffer).cast("q")
        self._rows = rows
        self._base = row * ROW_LEN
        self.row = row

    @staticmethod
    def create(path: str, *, rows: int) -> None:
        """Create (or truncate) a zeroed counter file with room for ``rows`` workers."""
        with open(path, "wb") as f:
            f.truncate(max(rows, 1) * ROW_LEN * _SLOT)

    @classmethod
    def attach(cls, path: str) -> StatsBoard:
        """Map ``path`` and claim the first row that is free or owned by a dead process.

        Raises ``RuntimeError`` when every row belongs to a live process (more workers than rows).
        """
        fd = os.open(path, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            buffer = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                view = memoryview(buffer).cast("q")
                rows = size // (ROW_LEN * _SLOT)
                me = os.getpid()
                for row in range(rows):
                    owner = view[row * ROW_LEN]
                    if owner in (0, me) or not _alive(owner):
                        view[row * ROW_LEN] = me
                        view.release()
                        return cls(buffer=buffer, rows=rows, row=row)
                view.release()
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
        buffer.close()
        raise RuntimeError(f"no free row in stats file {path} ({rows} rows, all owned by live workers)")

    @classmethod
    def private(cls) -> StatsBoard:
        """A one-row board in process memory (for tests and embedding)."""
        return cls(buffer=bytearray(ROW_LEN * _SLOT), rows=1, row=0)

    def add(self, slot: int, n: int = 1) -> None:
        """Add ``n`` to this worker's ``slot`` (a :class:`Counter` or :func:`request_slot` value)."""
        self._view[self._base + slot] += n

    def total(self, slot: int) -> int:
        """Sum of ``slot`` over all workers."""
        view = self._view
        return sum(view[row * ROW_LEN + slot] for row in range(self._rows))

    def workers_seen(self) -> int:
        """How many rows have ever been claimed."""
        return sum(1 for row in range(self._rows) if self._view[row * ROW_LEN] != 0)

    def snapshot(self) -> dict[str, object]:
        """The ``/stats`` document: scalar totals plus non-zero ``requests_by_endpoint`` cells."""
        by_endpoint: dict[str, dict[str, int]] = {}
        for e, endpoint in enumerate(ENDPOINTS):
            cells = {str(s): self.total(request_slot(e, s)) for s in STATUSES}
            cells = {k: v for k, v in cells.items() if v}
            if cells:
                by_endpoint[endpoint] = cells
        return {
            "requests": self.total(Counter.INFERENCE_REQUESTS),
            "errors": self.total(Counter.INJECTED_ERRORS),
            "bad_requests": self.total(Counter.BAD_REQUESTS),
            "completed": self.total(Counter.COMPLETED),
            "disconnects": self.total(Counter.DISCONNECTS),
            "in_flight": self.total(Counter.IN_FLIGHT),
            "output_tokens": self.total(Counter.OUTPUT_TOKENS),
            "prompt_tokens": self.total(Counter.PROMPT_TOKENS),
            "wire_bytes_in": self.total(Counter.WIRE_BYTES_IN),
            "wire_bytes_out": self.total(Counter.WIRE_BYTES_OUT),
            "wire_connections": self.total(Counter.WIRE_CONNECTIONS),
            "workers": self.workers_seen(),
            "requests_by_endpoint": by_endpoint,
        }

    def prometheus(self, model: str = "mock-model") -> bytes:
        """The ``/metrics`` body in Prometheus text exposition format 0.0.4: the mock's own
        ``mock_*`` families, then the vLLM-style ones labelled ``model_name=model``."""
        lines = [
            "# HELP mock_requests_total HTTP requests answered, by endpoint and status code.",
            "# TYPE mock_requests_total counter",
        ]
        for e, endpoint in enumerate(ENDPOINTS):
            for s in STATUSES:
                value = self.total(request_slot(e, s))
                if value:
                    lines.append(f'mock_requests_total{{endpoint="{endpoint}",status="{s}"}} {value}')
        scalars = (
            ("mock_injected_errors_total", "counter", "Requests answered with an injected HTTP 500.",
             Counter.INJECTED_ERRORS),
            ("mock_bad_requests_total", "counter", "Inference requests rejected with HTTP 400.",
             Counter.BAD_REQUESTS),
            ("mock_output_tokens_total", "counter", "Tokens generated (sent or fully scheduled).",
             Counter.OUTPUT_TOKENS),
            ("mock_prompt_tokens_total", "counter", "Prompt tokens counted on admitted requests.",
             Counter.PROMPT_TOKENS),
            ("mock_client_disconnects_total", "counter", "Responses cut short by the client.",
             Counter.DISCONNECTS),
            ("mock_requests_in_flight", "gauge", "Inference requests being answered now.",
             Counter.IN_FLIGHT),
        )
        for name, kind, help_text, slot in scalars:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {self.total(slot)}"]
        lines += VLLM.lines(self, running=self.total(Counter.IN_FLIGHT), model=model)
        return ("\n".join(lines) + "\n").encode()

    def close(self) -> None:
        """Release the mapping; idempotent."""
        self._view.release()
        if isinstance(self._buffer, mmap.mmap) and not self._buffer.closed:
            self._buffer.close()

    @staticmethod
    def unlink(path: str) -> None:
        """Delete the counter file if it still exists."""
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
