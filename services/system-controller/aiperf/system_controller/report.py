"""What a finished profile run prints: shared by `aiperf profile` (local) and the
system-controller's own entry point (Kubernetes), so both report the same way."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from aiperf.config import RunConfig
from aiperf.config.benchmark import prefixed_exports
from aiperf.config.markers import END_MARKER, READY_MARKER
from aiperf.messages import Finalized, SystemState
from aiperf.metrics import RAW_JSONL, write_atomic
from aiperf.system_controller.profile_driver import ProfileOutcome
from aiperf.system_controller.service import Verdict


def report(config: RunConfig, verdict: Verdict, outcome: ProfileOutcome) -> int:
    """Print the results table, the accounting, client overhead, start-up, lost workers and
    the verdict; write the results-ready marker when the run produced final results; return the
    exit code (2 when every request
    failed the way a wrong flag makes them fail, 1 when the accounting does not balance)."""
    results = outcome.results
    if results is not None:
        print(results.table)
        print(f"accounting: {results.accounting_line}")
        if results.overhead_line:
            print(results.overhead_line)
        if results.startup_s is not None:
            print(f"start-up: {results.startup_s:.2f} s from command start to first request sent")
        for problem in results.problems:
            print(f"ACCOUNTING MISMATCH: {problem}", file=sys.stderr)
        raw = [RAW_JSONL] if outcome.raw_bytes is not None else []
        print(f"results: {config.artifact_dir}/ ({', '.join([*results.files, *raw, 'inputs.json'])})")
    for lost in verdict.degraded:
        print(f"warning: lost {lost}", file=sys.stderr)
    if verdict.lost_pods:
        print(f"warning: lost worker pods: {', '.join(verdict.lost_pods)}", file=sys.stderr)
    if verdict.degraded:
        print("warning: requests in flight at lost workers were counted as failed (see the accounting)",
              file=sys.stderr)
    user_error = _all_failed_hint(config, results)
    if verdict.user_error:
        print(f"error: {verdict.reason}", file=sys.stderr)
    elif verdict.reason:
        print(f"run {verdict.state}: {verdict.reason}", file=sys.stderr)
    elif user_error:
        print(f"error: {user_error}", file=sys.stderr)
        return 2
    if results is not None and not results.balanced:
        return 1
    if results is not None and verdict.state in (SystemState.DONE, SystemState.CANCELLED):
        try:
            link_prefixed_exports(config)
        except OSError as exc:
            print(f"error: cannot name the exports with --profile-export-prefix in {config.artifact_dir}: "
                  f"{exc.strerror or exc}", file=sys.stderr)
            return 1
        try:
            _write_ready_marker(config, verdict)
        except OSError as exc:
            print(f"error: cannot write the results-ready marker in {config.artifact_dir}: "
                  f"{exc.strerror or exc}", file=sys.stderr)
            return 1
    return verdict.exit_code


def _all_failed_hint(config: RunConfig, results: Finalized | None) -> str | None:
    """A user-facing hint when every request failed the same way a wrong flag would."""
    if results is None or results.request_count or not results.error_request_count:
        return None
    try:
        doc = json.loads(Path(config.artifact_dir, "profile_export_aiperf.json").read_text())
    except (OSError, ValueError):
        return None
    codes = {e.get("error_details", {}).get("code") for e in doc.get("error_summary", [])}
    endpoint = config.benchmark.endpoint
    if codes == {404}:
        return (f"every request got HTTP 404 from {endpoint.url}: check --url and "
                f"--endpoint-type ({endpoint.type})")
    if codes <= {401, 403}:
        return "every request was refused (HTTP 401/403): check --api-key and --header"
    return None


def link_prefixed_exports(config: RunConfig) -> list[str]:
    """With `artifacts.prefix` (`--profile-export-prefix`): each export written under its
    standard name also gets its prefixed name (`prefixed_exports`), a hard link (a copy where
    links are not possible); returns the names made. Raises `OSError`."""
    prefix = config.benchmark.artifacts.prefix
    if prefix is None:
        return []
    made = []
    folder = Path(config.artifact_dir)
    for standard, prefixed in prefixed_exports(prefix).items():
        source, target = folder / standard, folder / prefixed
        if not source.is_file() or source == target:
            continue
        target.unlink(missing_ok=True)
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)
        made.append(prefixed)
    return made


def _write_ready_marker(config: RunConfig, verdict: Verdict) -> None:
    """`.aiperf_results_ready.json`, atomically, only once the exports are written and balanced
    and the run completed or was cancelled (`partial` when workers were lost): readers may take
    the exports as final once it exists."""
    marker = {"ready": True, "was_cancelled": verdict.state is SystemState.CANCELLED,
              "partial": bool(verdict.degraded)}
    write_atomic(Path(config.artifact_dir, READY_MARKER), (json.dumps(marker) + "\n").encode())


def write_end_marker(config: RunConfig, verdict: Verdict, exit_code: int) -> None:
    """`.aiperf_run_ended.json` (`aiperf.config.markers.END_MARKER`), atomically, for every
    outcome: the run's state, the exit code the controller is about to exit with, and the reason.
    A marker that cannot be written is reported on stderr; the exit code stays the run's."""
    marker = {"state": str(verdict.state), "exit_code": exit_code, "reason": verdict.reason}
    try:
        write_atomic(Path(config.artifact_dir, END_MARKER), (json.dumps(marker) + "\n").encode())
    except OSError as exc:
        print(f"error: cannot write the run-ended marker in {config.artifact_dir}: {exc.strerror or exc}",
              file=sys.stderr)
