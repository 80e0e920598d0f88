"""Open-file limits for processes that hold many connections (a worker at --concurrency 15000).

Linux starts most sessions with a soft RLIMIT_NOFILE of 1024 and a hard limit far above it; a
process may raise its own soft limit up to the hard one, and, like Go programs, a process that
opens one socket per request in flight should. `ensure_open_files` does so and turns a hard limit
too low for the requested load into one clear `UserError` instead of EMFILE mid-run; the CLI
checks it before starting anything (a worker inherits the hard limit), each worker again.
"""

from __future__ import annotations

import math
import resource

from aiperf.config import RunConfig
from aiperf.runtime.errors import UserError

FD_RESERVE = 256
"""Descriptors a service needs besides its connections: ZMQ sockets and their wake-up pipes, the
event loop, logs, the memory-mapped dataset, the interpreter's own files."""
SOFT_CAP = 1 << 20
"""The soft limit is raised to the hard one, at most to this (an unlimited hard limit)."""
WORKER_HINT = "add workers (--workers-max) or lower --concurrency"
"""What a user can change instead of the limit, for `ensure_open_files` in a worker's place."""


def connections_per_worker(config: RunConfig) -> int:
    """Connections one worker may hold at once: its share of the largest phase concurrency (the
    timing-manager gives each credit to the least-loaded worker), plus a quarter for uneven
    shares; 0 when a phase has no concurrency cap (nothing to check)."""
    caps = [phase.concurrency for phase in config.benchmark.phases]
    if not caps or None in caps:
        return 0
    share = math.ceil(max(c for c in caps if c is not None) / max(config.services.total_workers, 1))
    return share + share // 4


def raise_open_files_limit() -> tuple[int, int]:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit (at most `SOFT_CAP`, never lower
    than it is); return the (soft, hard) pair in force afterwards. Children inherit it. A limit
    the system refuses to change is left as it is."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = SOFT_CAP if hard == resource.RLIM_INFINITY else min(hard, SOFT_CAP)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft, hard


def ensure_open_files(connections: int, *, hint: str) -> int:
    """Make room for `connections` sockets plus `FD_RESERVE` in this process: raise the soft
    limit (`raise_open_files_limit`) and return it. Raises `UserError` (one line, ending with
    `hint`, what the user can change instead) when even the hard limit is too low."""
    soft, hard = raise_open_files_limit()
    needed = connections + FD_RESERVE
    if soft != resource.RLIM_INFINITY and soft < needed:
        raise UserError(f"each worker process needs about {needed} open files ({connections} connections), "
                        f"but the open-file limit is {soft} (hard limit {hard}): raise it "
                        f"(`ulimit -Hn {needed}` as root, LimitNOFILE= in systemd, --ulimit nofile= "
                        f"in docker) or {hint}")
    return soft
