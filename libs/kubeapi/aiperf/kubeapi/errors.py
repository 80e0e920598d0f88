"""The errors of `aiperf.kubeapi`: one line each, for a person to act on.

- `KubeError`: a problem the user can fix (a missing kubeconfig, no such run); the CLI prints it
  and exits 2.
- `KubeClusterError(KubeError)`: the cluster failed rather than the user's input; exit 1.
- `Unreachable(KubeClusterError)`: a request got no answer (refused, reset, TLS, deadline).
- `ApiError(KubeClusterError)`: the API server answered with an error status; `status`,
  `reason` and `message` come from its `Status` body, `body` is the answer as received.
- `Gone(KubeClusterError)`: a watched object was deleted, or replaced by a same-name one.
"""

from __future__ import annotations

import http
import json


class KubeError(Exception):
    """A Kubernetes operation failed in a way the user can act on. `str(exc)` is one line that
    names the problem and the fix (the CLI prints it and exits 2)."""


class KubeClusterError(KubeError):
    """The cluster failed rather than the user's input: the API server is unreachable, answered
    an unexpected error, or a run's object vanished meanwhile (the CLI prints it and exits 1)."""


class Unreachable(KubeClusterError):
    """A request got no answer: connection refused or reset, a TLS failure, a deadline passed."""


class Gone(KubeClusterError):
    """A watched object was deleted (`replaced` False) or replaced by another object of the same
    name (`replaced` True) before the watch ended."""

    def __init__(self, message: str, *, replaced: bool) -> None:
        super().__init__(message)
        self.replaced = replaced


class ApiError(KubeClusterError):
    """The API server answered with an error status.

    `status` is the HTTP code; `reason` the `Status` body's reason (else the HTTP reason phrase);
    `message` its message with the first cause's appended (what a failed JSON Patch `test` or a
    schema violation says), else the reason; `body` the answer text as received, for a log."""

    def __init__(self, status: int, body: bytes | str = b"") -> None:
        self.status = status
        self.body = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        self.reason, self.message = _status_of(status, self.body)
        super().__init__(self.describe())

    def describe(self) -> str:
        """`409 Conflict: message`, for an error line or a log."""
        return f"{self.status} {self.reason}: {self.message}"

    @property
    def not_found(self) -> bool:
        """404: no such object (or resource type, or namespace)."""
        return self.status == 404

    @property
    def lost_race(self) -> bool:
        """True when a precondition of the write no longer held: 409 Conflict (a stale
        resourceVersion, a delete precondition on another UID) or 422 for a failed JSON Patch
        `test` (the message names it: `testing value /metadata/uid failed`). Any other 422 (a
        schema violation) is not a lost race."""
        return self.status == 409 or (self.status == 422 and "testing value" in self.message and "failed" in self.message)

    @property
    def transient(self) -> bool:
        """True for an answer that says "not now" rather than "no": 429 (API Priority and
        Fairness throttling) and 5xx (an API server or etcd in trouble)."""
        return self.status == 429 or self.status >= 500


def _status_of(status: int, body: str) -> tuple[str, str]:
    """(reason, message) from a `Status` body (any JSON object with those keys), else the HTTP
    reason phrase (and the body text, when it is not JSON)."""
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    try:
        doc = json.loads(body) if body else {}
    except ValueError:
        doc = {}
    if not isinstance(doc, dict):
        text = body.strip()[:200] if body and not isinstance(doc, list) else ""
        return phrase, text or phrase
    reason = str(doc.get("reason") or phrase)
    message = str(doc.get("message") or "")
    causes = (doc.get("details") or {}).get("causes") or [{}]
    if cause := str((causes[0] or {}).get("message") or ""):
        message = f"{message}: {cause}" if message else cause
    return reason, message or reason


__all__ = ["ApiError", "Gone", "KubeClusterError", "KubeError", "Unreachable"]
