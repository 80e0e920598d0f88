"""Throwaway TLS material for a `FakeKube` that pods reach the in-cluster way (https, verified
against the ServiceAccount's `ca.crt`): a CA and a server certificate for one IP address,
made with the `openssl` command (Debian's package), valid for a day."""

from __future__ import annotations

import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: the CA certificate clients trust, and the server's certificate and key."""

    ca: Path
    cert: Path
    key: Path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, self.key)
        return context


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_tls_files(directory: Path, ip: str) -> TlsFiles:
    """A fresh CA in `directory` and a server certificate it signed for IP address `ip`."""
    directory.mkdir(parents=True, exist_ok=True)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "1", "-subj", "/CN=fake-kube-ca",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign", cwd=directory)
    _openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=kubernetes", cwd=directory)
    (directory / "san.ext").write_text(f"subjectAltName=IP:{ip}\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.crt", "-days", "1", "-extfile", "san.ext", cwd=directory)
    return TlsFiles(ca=directory / "ca.crt", cert=directory / "server.crt", key=directory / "server.key")
