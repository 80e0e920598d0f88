"""`aiperf.servermetrics` imports `prometheus_client` at the first parse, not with the package
(the records-manager imports it for its server identity; the zygote imports that before every
fork), and `urllib.request` when an `HttpFetch` opens, not with the package (the `aiperf`
process imports it before its first request). Fresh interpreters: the check is on
`sys.modules`."""

from __future__ import annotations

import subprocess
import sys

import prometheus_client  # noqa: F401  (the interpreter below imports it: here so that Pants infers it)

import aiperf.servermetrics  # noqa: F401

CODE = ("import sys\n"
        "import aiperf.servermetrics\n"
        "print('prometheus_client' in sys.modules or 'urllib.request' in sys.modules)\n"
        "families = aiperf.servermetrics.parse_metrics('# TYPE x counter\\nx_total 3\\n')\n"
        "print('prometheus_client' in sys.modules, families['x'].kind)\n")


def test_prometheus_client_is_imported_at_the_first_parse() -> None:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["False", "True", "counter"]
