"""`--ui dashboard`: its model (phases, rates, metrics and errors from the streamed jsonl, logs)
and its frames, rendered to text; the terminal itself is tested in tests/e2e (tmux)."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
from rich.console import Console

from aiperf.cli.benchmark_flags import build_benchmark
from aiperf.cli.dashboard import Dashboard, LogSink
from aiperf.cli.dashboard_state import DashboardState, LineTail, log_row
from aiperf.cli.profile_options import LocalFlags, ProfileFlags
from aiperf.config import CommsOptions, RunConfig, RuntimeOptions, ServiceCounts
from aiperf.messages import (
    Phase,
    PhaseComplete,
    PhaseStarted,
    Progress,
    ServiceState,
    ServiceType,
    SystemState,
)
from aiperf.runtime.control_server import ServiceInfo

FIXTURES = Path(__file__).resolve().parents[2] / "libs" / "plot" / "tests" / "data"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_line_tail_returns_complete_new_lines_and_survives_truncation(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    tail = LineTail(path)
    assert tail.read() == []  # not there yet
    path.write_bytes(b"one\ntw")
    assert tail.read() == [b"one"]
    with open(path, "ab") as f:
        f.write(b"o\nthree\n")
    assert tail.read() == [b"two", b"three"]
    assert tail.read() == []
    path.write_bytes(b"new\n")  # a new, shorter file
    assert tail.read() == [b"new"]


def test_phases_progress_and_rates_follow_the_broadcasts() -> None:
    clock = Clock()
    state = DashboardState(clock=clock)
    state.apply(PhaseStarted(phase=Phase.PROFILING, started_at_ns=1, expected_credits=100))
    view = state.phases[Phase.PROFILING]
    assert view.fraction(clock.now) == 0.0
    for second, done in ((1, 10), (2, 30), (3, 50)):
        clock.now = 100.0 + second
        state.apply(Progress(phase=Phase.PROFILING, completed=done, errors=1))
    assert view.fraction(clock.now) == 0.5 and view.errors == 1
    assert view.rate(clock.now) == 20.0  # (50 - 10) over the last 2 s of samples
    clock.now = 105.0
    state.apply(PhaseComplete(phase=Phase.PROFILING, issued=100, returned=100))
    assert view.fraction(clock.now) == 1.0 and view.completed == 100
    assert view.rate(clock.now) == 20.0  # 100 over the whole 5 s phase
    assert state.current is Phase.PROFILING
    # The records-manager counts records, which trail the returned credits: a late broadcast
    # never takes the count back below the timing-manager's final number.
    state.apply(Progress(phase=Phase.PROFILING, completed=97, errors=2))
    assert view.completed == 100 and view.errors == 2


def test_a_duration_phase_advances_by_time() -> None:
    clock = Clock()
    state = DashboardState(clock=clock)
    state.apply(PhaseStarted(phase=Phase.PROFILING, started_at_ns=1, expected_duration_s=10.0))
    clock.now += 2.5
    assert state.phases[Phase.PROFILING].fraction(clock.now) == 0.25


def test_records_give_running_percentiles_and_errors_by_type() -> None:
    lines = (FIXTURES / "streaming" / "profile_export.jsonl").read_bytes().splitlines()
    records = [json.loads(line) for line in lines]
    failed = sum("error" in r for r in records)
    state = DashboardState()
    state.add_records([*lines, b"not json"])
    assert state.errors == {"Internal Server Error (500)": failed}
    ttft = state.metrics[Phase.PROFILING]["time_to_first_token"]
    assert len(ttft.values) == len(records) - failed
    stats = ttft.percentiles()
    assert stats is not None and min(ttft.values) <= stats["p50"] <= stats["p99"] <= max(ttft.values)


def test_log_rows_are_short_and_readable() -> None:
    line = json.dumps({"event": "worker.lost", "level": "warning", "service": "system-controller",
                       "timestamp": "2026-12-01T18:00:01.123Z", "worker": "worker-g0-1"})
    assert log_row(line) == "18:00:01 warning system-controller: worker.lost worker=worker-g0-1"
    assert log_row("plain text") == "plain text"


def test_the_log_sink_feeds_the_pane_while_live_and_stderr_otherwise() -> None:
    state, fallback = DashboardState(), io.StringIO()
    sink = LogSink(state, fallback)
    sink.write("before\n")
    sink.live = True
    sink.write('{"event": "one", "level": "info"}\n{"event": "tw')
    sink.write('o", "level": "error"}\n')
    assert list(state.logs) == ["info one", "error two"]
    assert fallback.getvalue() == "before\n"


@dataclass
class Planned:
    service_id: str
    service_type: ServiceType
    group_id: str = "g0"


@dataclass
class FakeController:
    """What the dashboard reads of the system-controller: its plan, registry and lost workers."""

    planned: list[Planned]
    services: dict[str, ServiceInfo] = field(default_factory=dict)
    lost: dict[str, str] = field(default_factory=dict)


def _config(tmp_path: Path) -> RunConfig:
    benchmark = build_benchmark(ProfileFlags(model=["mock"], url=["http://127.0.0.1:9"]),
                                LocalFlags(ui="dashboard", artifact_dir=str(tmp_path))).benchmark
    return RunConfig(run_id="r1", mode="profile", artifact_dir=str(tmp_path), t0_wall_ns=0, benchmark=benchmark,
                     comms=CommsOptions(ipc_dir=str(tmp_path / "ipc")), services=ServiceCounts(),
                     runtime=RuntimeOptions(heartbeat_interval_s=1.0))


def _text(dashboard: Dashboard, console: Console) -> str:
    console.print(dashboard.render())
    return console.export_text()


def test_a_frame_shows_phases_metrics_workers_errors_and_logs(tmp_path: Path) -> None:
    clock = Clock()
    console = Console(record=True, width=150, file=io.StringIO())
    dashboard = Dashboard(config=_config(tmp_path), console=console, clock=clock)
    assert "waiting for the services to start" in _text(dashboard, console)
    info = {sid: ServiceInfo(service_id=sid, service_type=ServiceType.WORKER, pid=1, host="h", group_id="g0",
                             state=ServiceState.RUNNING, last_seen=clock.now - age)
            for sid, age in (("worker-g0-0", 0.5), ("worker-g0-1", 7.0), ("worker-g0-2", 0.2))}
    dashboard.watch(FakeController(  # type: ignore[arg-type]  # a fake of the controller's registry
        planned=[Planned(sid, ServiceType.WORKER) for sid in info] + [Planned("timing-manager", ServiceType.TIMING_MANAGER)],
        services=info, lost={"worker-g0-2": "gone"}))
    dashboard.state.state = SystemState.PROFILING
    dashboard.state.apply(PhaseStarted(phase=Phase.WARMUP, started_at_ns=1, expected_credits=4))
    dashboard.state.apply(PhaseComplete(phase=Phase.WARMUP, issued=4, returned=4))
    dashboard.state.apply(PhaseStarted(phase=Phase.PROFILING, started_at_ns=2, expected_credits=20))
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "worker-g0-1.log").write_text('{"event": "http.slow", "level": "warning"}\n')
    (tmp_path / "profile_export.jsonl").write_bytes((FIXTURES / "streaming" / "profile_export.jsonl").read_bytes())
    dashboard.poll()
    dashboard.state.apply(Progress(phase=Phase.PROFILING, completed=20, errors=5))
    text = _text(dashboard, console)
    assert "aiperf profile mock @ http://127.0.0.1:9" in text and "state profiling" in text
    assert "warmup" in text and "4/4" in text and "20/20" in text
    assert "Metrics (profiling, ms)" in text and "TTFT" in text and "Latency" in text
    rows = {sid: line[line.index(sid):] for line in text.splitlines() for sid in info if sid in line}
    assert "running" in rows["worker-g0-0"] and "0.5 s ago" in rows["worker-g0-0"]
    assert "silent" in rows["worker-g0-1"] and "7.0 s ago" in rows["worker-g0-1"]
    assert "lost" in rows["worker-g0-2"]
    assert "0/1 running" in text  # the timing-manager has not registered
    assert "Errors by type" in text and "Internal Server Error (500)" in text
    assert "warning http.slow" in text


def test_a_narrow_terminal_stacks_the_tables(tmp_path: Path) -> None:
    console = Console(record=True, width=80, file=io.StringIO())
    dashboard = Dashboard(config=_config(tmp_path), console=console)
    text = _text(dashboard, console)
    metrics = next(i for i, line in enumerate(text.splitlines()) if "Metrics" in line)
    workers = next(i for i, line in enumerate(text.splitlines()) if "Workers" in line)
    assert workers > metrics + 3


def test_summary_exports_say_there_are_no_running_metrics(tmp_path: Path) -> None:
    config = _config(tmp_path)
    artifacts = msgspec.structs.replace(config.benchmark.artifacts, export_level="summary")
    config = msgspec.structs.replace(config, benchmark=msgspec.structs.replace(config.benchmark, artifacts=artifacts))
    console = Console(record=True, width=150, file=io.StringIO())
    assert "n/a with --export-level summary" in _text(Dashboard(config=config, console=console), console)
