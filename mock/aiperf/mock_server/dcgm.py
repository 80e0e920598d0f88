"""A fake NVIDIA DCGM exporter: `GET /metrics` answers what dcgm-exporter 3.x serves with its
default counters (`default-counters.csv`) for some H100 GPUs, so GPU telemetry can be tried and
tested without a GPU.

Each GPU's series carry dcgm-exporter's labels (`gpu`, `UUID`, `pci_bus_id`, `device`,
`modelName`, `Hostname`, `DCGM_FI_DRIVER_VERSION`, and `container`/`namespace`/`pod` with
`--pod`); units are DCGM's (power W, energy mJ since boot, memory MiB, SM activity a ratio,
power violation ns). Counters are named without `_total`, as dcgm-exporter names them.

`--static` keeps the gauges fixed (a test can then predict their statistics) and the counters
growing by a fixed step per scrape (every answer differs, as a collector that skips repeated
answers needs); otherwise the load follows a slow wave and the counters grow with it, like a busy
GPU's.

    python -m aiperf.mock_server.dcgm --port 9400 --gpus 2
"""

from __future__ import annotations

import argparse
import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "NVIDIA H100 80GB HBM3"
DRIVER = "550.54.15"

FIELDS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total number of NVLink bandwidth counters for all lanes."),
    ("DCGM_FI_DEV_POWER_VIOLATION", "counter", "Throttling duration due to power constraints (in us)."),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active sending or "
                                          "receiving data."),
)


def uuid_of(index: int) -> str:
    return f"GPU-{index:08x}-5f6c-4d2e-9b1a-{0xa1b2c3d40000 + index:012x}"


def static_values(index: int) -> dict[str, float]:
    """One GPU's values in `--static` mode (index 0 and 1 differ)."""
    return {
        "DCGM_FI_DEV_SM_CLOCK": 1980.0, "DCGM_FI_DEV_MEM_CLOCK": 2619.0, "DCGM_FI_DEV_MEMORY_TEMP": 48.0,
        "DCGM_FI_DEV_GPU_TEMP": 55.0 + index, "DCGM_FI_DEV_POWER_USAGE": 412.5 + 10 * index,
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 9_876_543_210.0 + index, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0.0,
        "DCGM_FI_DEV_GPU_UTIL": 87.0, "DCGM_FI_DEV_MEM_COPY_UTIL": 41.0, "DCGM_FI_DEV_ENC_UTIL": 0.0,
        "DCGM_FI_DEV_DEC_UTIL": 0.0, "DCGM_FI_DEV_XID_ERRORS": 0.0, "DCGM_FI_DEV_FB_FREE": 4_096.0,
        "DCGM_FI_DEV_FB_USED": 77_359.0, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": 123_456_789.0,
        "DCGM_FI_DEV_POWER_VIOLATION": 1_500_000.0, "DCGM_FI_DEV_VGPU_LICENSE_STATUS": 0.0,
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0.91, "DCGM_FI_PROF_SM_ACTIVE": 0.8375, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.42,
        "DCGM_FI_PROF_DRAM_ACTIVE": 0.55,
    }


@dataclass
class FakeDcgm:
    """The exporter's state: `gpus` GPUs on `hostname`; `static` keeps every value fixed; `pod`
    adds Kubernetes labels; `clock` is seconds (injected for tests); `step_mj` is the energy a
    scrape adds in static mode."""

    gpus: int = 2
    hostname: str = "gpu-node-1"
    static: bool = False
    pod: str | None = None
    clock: Callable[[], float] = time.monotonic
    step_mj: float = 1_000.0

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Back to the start: the counters at their first values, the wave at its origin."""
        self._t0 = self._last = self.clock()
        self._energy_mj = [9_876_543_210.0 + i for i in range(self.gpus)]
        self._violation_ns = [1_500_000.0] * self.gpus
        self._lock = threading.Lock()

    def values(self, index: int, now: float) -> dict[str, float]:
        """GPU `index`'s values at `now` (advances the counters; call under the lock)."""
        base = static_values(index)
        if self.static:
            self._energy_mj[index] += self.step_mj
            return {**base, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": self._energy_mj[index]}
        load = 0.5 + 0.45 * math.sin((now - self._t0) / 7.0 + index)  # 0.05 .. 0.95
        power = 90.0 + 600.0 * load
        dt = max(now - self._last, 0.0)
        self._energy_mj[index] += power * dt * 1000.0
        if power > 650.0:
            self._violation_ns[index] += dt * 1e9 * 0.2
        return {**base, "DCGM_FI_DEV_POWER_USAGE": round(power, 3), "DCGM_FI_DEV_GPU_UTIL": round(100 * load),
                "DCGM_FI_DEV_MEM_COPY_UTIL": round(60 * load), "DCGM_FI_DEV_GPU_TEMP": round(38 + 40 * load),
                "DCGM_FI_DEV_FB_USED": 70_000.0 + round(7_000 * load), "DCGM_FI_DEV_FB_FREE": 11_559.0 - round(7_000 * load),
                "DCGM_FI_PROF_SM_ACTIVE": round(0.95 * load, 4), "DCGM_FI_PROF_GR_ENGINE_ACTIVE": round(load, 4),
                "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": round(self._energy_mj[index]),
                "DCGM_FI_DEV_POWER_VIOLATION": round(self._violation_ns[index])}

    def labels(self, index: int) -> str:
        pairs = [("gpu", str(index)), ("UUID", uuid_of(index)), ("pci_bus_id", f"00000000:{0x18 + index:02X}:00.0"),
                 ("device", f"nvidia{index}"), ("modelName", MODEL), ("Hostname", self.hostname),
                 ("DCGM_FI_DRIVER_VERSION", DRIVER)]
        if self.pod is not None:
            pairs += [("container", "vllm"), ("namespace", "inference"), ("pod", self.pod)]
        return ",".join(f'{k}="{v}"' for k, v in pairs)

    def exposition(self) -> str:
        """The text of one scrape."""
        with self._lock:
            now = self.clock()
            per_gpu = [self.values(i, now) for i in range(self.gpus)]
            self._last = now
        lines = []
        for name, kind, help_text in FIELDS:
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")
            for index, values in enumerate(per_gpu):
                value = values[name]
                shown = str(int(value)) if float(value).is_integer() else repr(value)
                lines.append(f"{name}{{{self.labels(index)}}} {shown}")
        return "\n".join(lines) + "\n"


@contextlib.contextmanager
def running_dcgm(exporter: FakeDcgm | None = None, *, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve `exporter` (default: two GPUs, moving values) in a thread; yields its metrics URL."""
    served = exporter or FakeDcgm()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            body = served.exposition().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fake-dcgm", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9400)
    parser.add_argument("--gpus", type=int, default=2)
    parser.add_argument("--hostname", default="gpu-node-1")
    parser.add_argument("--static", action="store_true", help="the same values at every scrape")
    parser.add_argument("--pod", help="add Kubernetes labels for this pod name")
    args = parser.parse_args(argv)
    exporter = FakeDcgm(gpus=args.gpus, hostname=args.hostname, static=args.static, pod=args.pod)
    with running_dcgm(exporter, host=args.host, port=args.port) as url:
        print(url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
