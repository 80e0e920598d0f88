"""`aiperf kube preflight`: check the cluster before a run, one PASS/FAIL line per check
(kubeconfig, API server, namespace, JobSet API, each referenced Secret and key); checks that
depend on a failed one are skipped. Exit 1 when any check fails, 2 for a malformed flag."""

from __future__ import annotations

from collections.abc import Callable

from aiperf.cli.kube_flags import parse_list, parse_mapping
from aiperf.cli.kube_options import KubeTarget
from aiperf.cli.kube_shared import EXIT_FAILED, EXIT_OK, run_async
from aiperf.kube import SecretRef
from aiperf.kubeapi import JOBSETS, SECRETS, ApiError, KubeApi, KubeError, connect, resolve_namespace
from aiperf.kuberun import direct

Report = Callable[[bool, str, str], bool]


class Checks:
    """Prints one line per check (`report`) and counts the failures."""

    def __init__(self) -> None:
        self.failures = 0

    def report(self, ok: bool, check: str, detail: str) -> bool:
        """Print `PASS|FAIL  check: detail`; returns `ok`."""
        self.failures += 0 if ok else 1
        print(f"{'PASS' if ok else 'FAIL'}  {check}: {detail}")
        return ok


def preflight(target: KubeTarget, *, env_from_secrets: list[str] | None, api_key_secret: str | None,
              headers_secret: str | None, image_pull_secrets: list[str] | None) -> int:
    """`kube preflight` (see the module doc)."""

    def refs() -> tuple[list[tuple[str, SecretRef]], list[str]]:
        mapping = parse_mapping("--env-from-secrets", env_from_secrets)
        keyed = [(f"--env-from-secrets {env}", SecretRef.parse(ref, what=f"--env-from-secrets {env}"))
                 for env, ref in mapping.items()]
        for flag, ref in (("--api-key-secret", api_key_secret), ("--headers-secret", headers_secret)):
            if ref:
                keyed.append((flag, SecretRef.parse(ref, what=flag)))
        return keyed, parse_list("--image-pull-secrets", image_pull_secrets)

    async def work() -> int:
        keyed, pull = refs()
        checks = Checks()
        try:
            api = await connect(target.kubeconfig, target.kube_context)
            namespace = resolve_namespace(target.namespace, target.kubeconfig, target.kube_context)
        except KubeError as exc:
            checks.report(False, "kubeconfig", str(exc))
            return EXIT_FAILED
        async with api:
            checks.report(True, "kubeconfig", f"loaded (server {api.host})")
            if not await _cluster(api, namespace, checks.report):
                if keyed or pull:
                    print("SKIP  secrets: the namespace does not exist")
                return EXIT_FAILED
            for flag, ref in keyed:
                await _check_secret(api, namespace, ref.secret, ref.key, flag, checks.report)
            for secret in pull:
                await _check_secret(api, namespace, secret, None, "--image-pull-secrets", checks.report)
        return EXIT_FAILED if checks.failures else EXIT_OK

    return run_async(work)


async def _cluster(api: KubeApi, namespace: str, report: Report) -> bool:
    """The API server, the namespace and the JobSet API; whether the secrets can be checked."""
    try:
        version = await api.request("GET", "/version")
        report(True, "api server", f"reachable (Kubernetes {version.get('gitVersion', '?')})")
    except ApiError as exc:
        report(False, "api server", f"answered {exc.status} {exc.reason}")
        print("SKIP  namespace, JobSet API, secrets: the API server is not reachable")
        return False
    except KubeError as exc:
        report(False, "api server", str(exc))
        print("SKIP  namespace, JobSet API, secrets: the API server is not reachable")
        return False
    try:
        await direct.ensure_namespace_exists(api, namespace)
        ns_ok = report(True, f"namespace {namespace}", "exists")
    except KubeError as exc:
        ns_ok = report(False, f"namespace {namespace}", str(exc))
    try:
        await api.request("GET", f"/apis/{JOBSETS.api_version}")
        report(True, "JobSet API", f"{JOBSETS.api_version} installed")
    except ApiError as exc:
        why = "not installed; install JobSet first" if exc.not_found else f"{exc.status} {exc.reason}"
        report(False, "JobSet API", f"{JOBSETS.api_version} {why}")
    return ns_ok


async def _check_secret(api: KubeApi, namespace: str, secret: str, key: str | None, flag: str,
                        report: Report) -> None:
    check = f"secret {secret}" + (f" key {key}" if key else "") + f" ({flag})"
    try:
        obj = await api.get(SECRETS, namespace, secret)
    except ApiError as exc:
        report(False, check, f"cannot read it: {exc.status} {exc.reason}")
        return
    if obj is None:
        report(False, check, f"no Secret {secret} in namespace {namespace}")
        return
    data = {**(obj.get("data") or {}), **(obj.get("stringData") or {})}
    if key is not None and key not in data:
        report(False, check, f"Secret {secret} has no key {key} (keys: {', '.join(sorted(data)) or 'none'})")
        return
    report(True, check, "present")


__all__ = ["preflight"]
