"""CURVE authentication of a run's channels: one server key pair and one client key pair per run.

Every socket of a secured context gets its CURVE options before its first bind/connect: a socket
that binds is a CURVE server (the run's server key pair), a socket that connects is a CURVE
client (the run's client key pair plus the server's public key). A ZAP handler in the same
context admits exactly one client public key, the run's, so a peer without CURVE, or with
another client key, never completes its handshake and none of its messages arrive. `inproc://`
endpoints carry no security mechanism and are left alone.

Keys are Z85 text. On disk they are two files, `server.key` and `client.key`, each in pyzmq's
certificate format (`public-key = "..."` and `secret-key = "..."` lines); `zmq.auth` reads them.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import msgspec
import zmq
import zmq.asyncio
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

SERVER_KEY_FILE = "server.key"
CLIENT_KEY_FILE = "client.key"
CURVE_KEYS_DIR_ENV = "AIPERF_CURVE_KEYS_DIR"
"""Environment override of `CommsOptions.curve_keys_dir` (a directory with the two key files)."""
RAW_UPLOAD_TOKEN = "raw-upload"
"""`CurveKeys.http_token` purpose of the raw-part uploads (worker pods -> the controller's api)."""


class CurveKeys(msgspec.Struct, frozen=True, kw_only=True):
    """The run's two CURVE key pairs, Z85-encoded (40 bytes each)."""

    server_public: bytes
    server_secret: bytes
    client_public: bytes
    client_secret: bytes

    def __post_init__(self) -> None:
        for name in ("server_public", "server_secret", "client_public", "client_secret"):
            if len(getattr(self, name)) != 40:
                raise ValueError(f"curve key {name} must be 40 Z85 characters")

    def __repr__(self) -> str:  # never print secret keys into a log or a traceback
        return f"CurveKeys(server_public={self.server_public!r}, client_public={self.client_public!r})"

    @classmethod
    def generate(cls) -> CurveKeys:
        """A fresh pair of key pairs from libzmq's CSPRNG. Raises `RuntimeError` when the
        installed libzmq has no CURVE."""
        if not zmq.has("curve"):
            raise RuntimeError("the installed libzmq was built without CURVE")
        server_public, server_secret = zmq.curve_keypair()
        client_public, client_secret = zmq.curve_keypair()
        return cls(server_public=server_public, server_secret=server_secret,
                   client_public=client_public, client_secret=client_secret)

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> CurveKeys:
        """Read `server.key` and `client.key` from `directory`. Raises `OSError` when a file
        is missing and `ValueError` when one lacks its secret key."""
        pairs = []
        for name in (SERVER_KEY_FILE, CLIENT_KEY_FILE):
            path = Path(directory) / name
            if not path.is_file():
                raise FileNotFoundError(f"curve key file {path} not found")
            public, secret = zmq.auth.load_certificate(path)
            if secret is None:
                raise ValueError(f"curve key file {path} has no secret-key line")
            pairs.append((public, secret))
        (server_public, server_secret), (client_public, client_secret) = pairs
        return cls(server_public=server_public, server_secret=server_secret,
                   client_public=client_public, client_secret=client_secret)

    def http_token(self, purpose: str) -> str:
        """A bearer token for one of the run's HTTP channels (`purpose` names it, e.g.
        ``"raw-upload"``): HMAC-SHA256 of `purpose` under the server's secret key, hex. Every
        container that holds the run's key files derives the same token; nobody else can, and
        a token for one purpose does not open another."""
        return hmac.new(self.server_secret, b"aiperf-http-token/" + purpose.encode(), hashlib.sha256).hexdigest()

    def files(self) -> dict[str, str]:
        """The two key files' names and texts (also the data of the Kubernetes Secret)."""
        return {SERVER_KEY_FILE: _certificate(self.server_public, self.server_secret),
                CLIENT_KEY_FILE: _certificate(self.client_public, self.client_secret)}

    def write(self, directory: str | os.PathLike[str]) -> None:
        """Write the two key files into `directory` (created 0700), each readable by the owner
        only, created with that mode so no other user ever sees a readable file."""
        target = Path(directory)
        target.mkdir(mode=0o700, parents=True, exist_ok=True)
        for name, text in self.files().items():
            fd = os.open(target / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(text)


def _certificate(public: bytes, secret: bytes) -> str:
    return ("metadata\n"
            "curve\n"
            f'    public-key = "{public.decode()}"\n'
            f'    secret-key = "{secret.decode()}"\n')


class _SecureContext(zmq.asyncio.Context):
    """An asyncio context that remembers the run's keys (pyzmq lets subclasses declare
    attributes at class level)."""

    curve: CurveKeys | None = None


def curve_of(ctx: zmq.Context[zmq.Socket[bytes]] | zmq.asyncio.Context) -> CurveKeys | None:
    """The keys a context was secured with (None: CURVE off)."""
    return getattr(ctx, "curve", None)


def _networked(endpoints: Sequence[str]) -> bool:
    return any(not e.startswith("inproc://") for e in endpoints)


def apply_curve(sock: zmq.Socket[bytes] | zmq.asyncio.Socket, keys: CurveKeys | None, *,
                bind: Sequence[str] = (), connect: Sequence[str] = ()) -> None:
    """Set CURVE options on `sock` before it binds/connects: server options when it binds an
    ipc/tcp endpoint, client options when it connects to one; nothing when `keys` is None or
    every endpoint is inproc. A socket may not be both (CURVE is per socket, not per endpoint):
    `ValueError`."""
    if keys is None:
        return
    binds, connects = _networked(bind), _networked(connect)
    if binds and connects:
        raise ValueError("a CURVE socket either binds or connects, not both")
    if binds:
        sock.setsockopt(zmq.CURVE_SECRETKEY, keys.server_secret)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, keys.server_public)
        sock.setsockopt(zmq.CURVE_SERVER, 1)
    elif connects:
        sock.setsockopt(zmq.CURVE_SECRETKEY, keys.client_secret)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, keys.client_public)
        sock.setsockopt(zmq.CURVE_SERVERKEY, keys.server_public)


class _OnlyRunClient:
    """ZAP credentials provider: admits the run's client public key and nothing else
    (pyzmq hands the key over Z85-encoded)."""

    def __init__(self, client_public: bytes) -> None:
        self._allowed = client_public

    def callback(self, domain: str, key: bytes) -> bool:
        return key == self._allowed


@contextmanager
def zmq_context(curve: CurveKeys | None = None, *,
                linger_ms: int = 0) -> Iterator[zmq.asyncio.Context]:
    """The process's ZMQ context. With `curve`, every socket it creates uses CURVE and a ZAP
    handler (a thread, started before this yields, stopped on exit) admits only the run's
    client key. On exit the context is destroyed with `linger_ms`."""
    ctx = _SecureContext()
    auth: ThreadAuthenticator | None = None
    try:
        if curve is not None:
            if not zmq.has("curve"):
                raise RuntimeError("CURVE requested but the installed libzmq was built without it")
            ctx.curve = curve
            auth = ThreadAuthenticator(zmq.Context.shadow(ctx.underlying))
            auth.start()
            auth.configure_curve_callback(domain="*", credentials_provider=_OnlyRunClient(
                curve.client_public))
        yield ctx
    finally:
        if auth is not None:
            auth.stop()
        ctx.destroy(linger=linger_ms)


def curve_keys_dir(configured: str | None) -> str | None:
    """Where the run's key files are: `AIPERF_CURVE_KEYS_DIR` when set, else `configured`."""
    return os.environ.get(CURVE_KEYS_DIR_ENV) or configured


def load_curve(configured: str | None) -> CurveKeys | None:
    """The run's keys from `curve_keys_dir(configured)`, or None (CURVE off) when neither
    names a directory."""
    directory = curve_keys_dir(configured)
    return None if directory is None else CurveKeys.load(directory)
