"""What a finished profile run prints: shared by `aiperf profile` (local) and the
system-controller's own entry point (Kubernetes), so both report the same way."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from aiperf.config import RunConfig
from aiperf.system_controller.profile_driver import ProfileOutcome
from aiperf.system_controller.service import Verdict


def report(config: RunConfig, verdict: Verdict, outcome: ProfileOutcome) -> int:
    """Print the results table, the accounting, client overhead, start-up, lost workers and
    the verdict; write the results-ready marker; return the exit code (2 when every request
    failed the way a wrong flag makes them fail, 1 when the accounting does not balance)."""
    results = outcome.results
    if results:
        print(results.get("table", ""))
        print(f"accounting: {results.get('accounting_line', '')}")
        if results.get("overhead_line"):
            print(results["overhead_line"])
        if results.get("startup_s") is not None:
            print(f"start-up: {results['startup_s']:.2f} s from command start to first request sent")
        for problem in results.get("problems", []):
            print(f"ACCOUNTING MISMATCH: {problem}", file=sys.stderr)
        print(f"results: {config.artifact_dir}/ ({', '.join(results.get('files', []))}, inputs.json)")
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
    if results and not results.get("balanced", True):
        return 1
    _write_ready_marker(config, verdict)
    return verdict.exit_code


def _all_failed_hint(config: RunConfig, results: dict[str, Any]) -> str | None:
    """A user-facing hint when every request failed the same way a wrong flag would."""
    if not results or results.get("request_count", 0) or not results.get("error_request_count"):
        return None
    try:
        doc = json.loads(Path(config.artifact_dir, "profile_export_aiperf.json").read_text())
    except (OSError, ValueError):
        return None
    codes = {e.get("error_details", {}).get("code") for e in doc.get("error_summary", [])}
    assert config.profile is not None
    if codes == {404}:
        return (f"every request got HTTP 404 from {config.profile.url}: check --url and "
                f"--endpoint-type ({config.profile.endpoint_type})")
    if codes <= {401, 403}:
        return "every request was refused (HTTP 401/403): check --api-key and --header"
    return None


def _write_ready_marker(config: RunConfig, verdict: Verdict) -> None:
    marker = {"ready": True, "was_cancelled": str(verdict.state) == "cancelled", "partial": False}
    Path(config.artifact_dir, ".aiperf_results_ready.json").write_text(json.dumps(marker) + "\n")
