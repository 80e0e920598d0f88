"""Reported timing against the wire itself (issue 24, item 3): for the very same requests, the
TTFT and ITL a client reports minus what a loopback packet capture saw. Not run in CI: it needs
root (tcpdump) and a quiet machine.

    python scripts/bench/wire.py [--requests 200] [--concurrency 1 64] [--ttft-ms 5] \
        [--itl-ms 10] [--osl 16] [--skip-aiperf]

(run with the repo's virtualenv python; the repo's source roots are put on PYTHONPATH by the
script. tcpdump is Debian's `tcpdump`, installed with apt-get when missing.)

What it does, per concurrency C and per client (ours, then AIPerf 0.13.0 from the venv
`scripts/ci/aiperf-oracle.sh` installs, unless `--skip-aiperf`):
1. starts the bundled mock server on 127.0.0.1 (a fixed TTFT and ITL, `--osl` tokens, one SSE
   event per token, each its own write, so each token is its own packet);
2. captures the loopback traffic to and from its port (`tcpdump -i lo`, nanosecond stamps)
   while the client runs `profile` (streaming chat, the same flags for both clients);
3. reads the capture (a small pcap reader here: Ethernet/SLL/null link, IPv4, TCP) and cuts
   each TCP connection into requests: a client payload starting `POST ` opens one, its
   `X-Request-ID` header names it, the server's packets up to the next request belong to it;
4. matches each request to its record in `profile_export.jsonl` by that id (both clients send
   the header and export it as `x_request_id`) and computes, per request:
   - wire TTFT: the request's first packet to the first server packet carrying content
     (`"content":"` followed by a non-empty token). The first packet is the SYN when the
     request opened its connection: AIPerf 0.13.0 starts its TTFT clock
     (`RequestRecord.start_perf_ns`) before aiohttp acquires or opens the connection, so its
     TTFT includes connection setup, and ours is defined the same way;
   - wire ITL: (last content packet - first content packet) / (OSL - 1), OSL the record's
     `output_sequence_length`: both clients define ITL as (request_latency - TTFT) / (OSL - 1)
     with request_latency ending at the last content response.
5. prints reported minus wire, median and p90, in ms, for TTFT and ITL, one row per client and
   concurrency, with the number of matched requests and the capture's kernel drops.

The default pace (64 streams x one token per 10 ms: ~6,400 packets/s) leaves the 2-core host's
CPU to spare; at `--itl-ms 2` c=64 saturates it (mock, worker, tcpdump) and a client's reads come
in batches of several packets, whose one stamp (the kernel's: of the batch's last packet) is late
for the earlier ones.

A positive TTFT difference is time the client added (the event loop's delay between the packet
and the stamp, work before the send); ITL differences are differences of such delays.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from oracle import aiperf_bin, aiperf_env, aiperf_flags, aiperf_tokenizer

REPO = Path(__file__).resolve().parents[2]
PY = REPO / "dist/export/python/virtualenvs/python-default/3.11.7/bin/python"


def our_env() -> dict[str, str]:
    roots = [*sorted((REPO / "libs").iterdir()), *sorted((REPO / "services").iterdir()), REPO / "cli", REPO / "mock"]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in roots if p.is_dir())
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- pcap ------------------------------------------------------------------------------------

@dataclass
class Packet:
    ts_ns: int
    src_port: int
    dst_port: int
    flags: int
    payload: bytes


_LINK_HEADER = {0: 4, 1: 14, 113: 16, 276: 20}
"""Bytes before the IP header per link type: null/loopback, Ethernet, Linux SLL, SLL2."""


def read_pcap(path: Path) -> list[Packet]:
    """The IPv4 TCP packets of a classic pcap file (micro- or nanosecond stamps)."""
    data = path.read_bytes()
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        end = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        end = ">"
    else:
        raise ValueError(f"{path}: not a pcap file")
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    link = struct.unpack(end + "I", data[20:24])[0]
    skip = _LINK_HEADER.get(link & 0xFFFF)
    if skip is None:
        raise ValueError(f"{path}: link type {link} not supported")
    record = struct.Struct(end + "IIII")
    packets: list[Packet] = []
    pos = 24
    while pos + 16 <= len(data):
        sec, frac, incl, _ = record.unpack_from(data, pos)
        pos += 16
        frame = data[pos:pos + incl]
        pos += incl
        ip = frame[skip:]
        if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
            continue
        ihl = (ip[0] & 0x0F) * 4
        total = struct.unpack_from("!H", ip, 2)[0]
        tcp = ip[ihl:total]
        if len(tcp) < 20:
            continue
        sport, dport = struct.unpack_from("!HH", tcp, 0)
        offset = (tcp[12] >> 4) * 4
        ts = sec * 1_000_000_000 + (frac if nano else frac * 1000)
        packets.append(Packet(ts, sport, dport, tcp[13], bytes(tcp[offset:])))
    return packets


SYN = 0x02


@dataclass
class WireRequest:
    """One request as the capture saw it."""

    request_id: str
    first_ns: int  # the request's first packet (its SYN when it opened the connection)
    content_ns: list[int] = field(default_factory=list)


def _has_content(payload: bytes) -> bool:
    at = payload.find(b'"content":"')
    while at >= 0:
        nxt = at + len(b'"content":"')
        if nxt < len(payload) and payload[nxt:nxt + 1] != b'"':
            return True
        at = payload.find(b'"content":"', nxt)
    return False


def wire_requests(packets: list[Packet], server_port: int) -> dict[str, WireRequest]:
    """The requests of a capture, by X-Request-ID."""
    syn_ns: dict[int, int] = {}
    current: dict[int, WireRequest] = {}
    found: dict[str, WireRequest] = {}
    for p in packets:
        if p.dst_port == server_port:
            client = p.src_port
            if p.flags & SYN:
                syn_ns[client] = p.ts_ns
                current.pop(client, None)
            elif p.payload.startswith(b"POST "):
                head = p.payload.split(b"\r\n\r\n", 1)[0]
                rid = ""
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"x-request-id":
                        rid = value.strip().decode()
                first = syn_ns.pop(client, p.ts_ns)
                current[client] = found[rid] = WireRequest(rid, first)
        elif p.src_port == server_port and p.payload:
            req = current.get(p.dst_port)
            if req is not None and _has_content(p.payload):
                req.content_ns.append(p.ts_ns)
    return found


class Capture:
    """tcpdump on the loopback for one TCP port, nanosecond stamps; stopped on exit."""

    def __init__(self, path: Path, port: int) -> None:
        self.path, self.port = path, port
        self.proc: subprocess.Popen[bytes] | None = None
        self.dropped = 0

    def __enter__(self) -> Capture:
        self.proc = subprocess.Popen(
            ["tcpdump", "-i", "lo", "-n", "-s", "0", "-B", "65536", "--time-stamp-precision", "nano",
             "-w", str(self.path), "tcp", "port", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()  # "listening on lo ..." once the capture is live
        if b"listening" not in line:
            raise RuntimeError(f"tcpdump did not start: {line.decode(errors='replace').strip()}")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        time.sleep(0.2)  # the last packets reach the capture buffer
        self.proc.send_signal(2)
        err = self.proc.stderr.read().decode(errors="replace")
        self.proc.wait()
        for line in err.splitlines():
            if "dropped by kernel" in line:
                self.dropped = int(line.split()[0])


class Mock:
    """The bundled mock server on 127.0.0.1:`port`; stopped on exit."""

    def __init__(self, port: int, ttft_ms: float, itl_ms: float) -> None:
        self.port, self.ttft_ms, self.itl_ms = port, ttft_ms, itl_ms
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Mock:
        py = str(PY) if PY.exists() else sys.executable
        self.proc = subprocess.Popen([py, "-m", "aiperf.mock_server.main", "--port", str(self.port),
                                      "--ttft-ms", str(self.ttft_ms), "--itl-ms", str(self.itl_ms)],
                                     env=our_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("the mock server did not start")

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.proc.terminate()
        self.proc.wait()


def workload(url: str, c: int, n: int, osl: int) -> list[str]:
    return ["--model", "m", "--url", url, "--endpoint-type", "chat", "--streaming",
            "--concurrency", str(min(c, n)), "--request-count", str(n), "--isl", "64",
            "--isl-stddev", "0", "--osl", str(osl), "--random-seed", "1"]


@dataclass
class Row:
    client: str
    concurrency: int
    matched: int
    dropped: int
    ttft: list[float]
    itl: list[float]


def compare(export: Path, wire: dict[str, WireRequest]) -> tuple[int, list[float], list[float]]:
    """(matched requests, TTFT reported-minus-wire ms, ITL reported-minus-wire ms)."""
    ttft: list[float] = []
    itl: list[float] = []
    matched = 0
    for line in export.read_text().splitlines():
        rec = json.loads(line)
        req = wire.get(rec.get("metadata", {}).get("x_request_id", ""))
        metrics = rec.get("metrics", {})
        if req is None or not req.content_ns or "time_to_first_token" not in metrics:
            continue
        matched += 1
        wire_ttft = (req.content_ns[0] - req.first_ns) / 1e6
        ttft.append(metrics["time_to_first_token"]["value"] - wire_ttft)
        osl = metrics.get("output_sequence_length", {}).get("value")
        if "inter_token_latency" in metrics and osl and osl >= 2:
            wire_itl = (req.content_ns[-1] - req.content_ns[0]) / 1e6 / (osl - 1)
            itl.append(metrics["inter_token_latency"]["value"] - wire_itl)
    return matched, ttft, itl


def run_one(name: str, argv: list[str], env: dict[str, str], work: Path, args: argparse.Namespace,
            c: int) -> Row | None:
    port = free_port()
    out = work / f"{name}-c{c}"
    pcap = work / f"{name}-c{c}.pcap"
    url = f"http://127.0.0.1:{port}"
    with Mock(port, args.ttft_ms, args.itl_ms), Capture(pcap, port) as cap:
        proc = subprocess.run([*argv, *workload(url, c, args.requests, args.osl), "--artifact-dir", str(out)],
                              env=env, cwd=work, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"{name} c={c} failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}",
              file=sys.stderr)
        return None
    wire = wire_requests(read_pcap(pcap), port)
    matched, ttft, itl = compare(out / "profile_export.jsonl", wire)
    return Row(name, c, matched, cap.dropped, ttft, itl)


def p(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--ttft-ms", type=float, default=5.0)
    parser.add_argument("--itl-ms", type=float, default=10.0)
    parser.add_argument("--osl", type=int, default=16)
    parser.add_argument("--skip-aiperf", action="store_true", help="only our rows")
    args = parser.parse_args()
    if shutil.which("tcpdump") is None:
        subprocess.run(["apt-get", "install", "-y", "tcpdump"], check=True, stdout=subprocess.DEVNULL)
    clients: list[tuple[str, list[str], dict[str, str]]] = [
        ("ours", [str(PY) if PY.exists() else sys.executable, "-m", "aiperf.cli", "profile", "--export-http-trace"],
         our_env())]
    if not args.skip_aiperf:
        try:
            bin_dir = aiperf_bin()
            tok = aiperf_tokenizer(bin_dir)
            clients.append(("AIPerf 0.13.0", [str(bin_dir / "aiperf"), "profile", *aiperf_flags(tok)], aiperf_env()))
        except subprocess.CalledProcessError as exc:
            print(f"AIPerf 0.13.0 could not be set up: {exc}", file=sys.stderr)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="wire-") as tmp:
        for c in args.concurrency:
            for name, argv, env in clients:
                row = run_one(name.split()[0].lower(), argv, env, Path(tmp), args, c)
                if row is not None:
                    row.client = name
                    rows.append(row)
    print(f"load average {os.getloadavg()[0]:.2f}; mock ttft {args.ttft_ms} ms, itl {args.itl_ms} ms, "
          f"osl {args.osl}, {args.requests} requests")
    print("| client | c | matched | dropped | TTFT - wire median ms | p90 | ITL - wire median ms | p90 |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.client} | {r.concurrency} | {r.matched} | {r.dropped} | {statistics.median(r.ttft) if r.ttft else float('nan'):+.3f} "
              f"| {p(r.ttft, 0.9):+.3f} | {statistics.median(r.itl) if r.itl else float('nan'):+.4f} | {p(r.itl, 0.9):+.4f} |")


if __name__ == "__main__":
    main()
