"""`aiperf kube ...`: run and manage benchmarks on Kubernetes (direct mode: ServiceAccount,
Role, RoleBinding, CURVE key Secret, ConfigMap and JobSet, created with the user's own credentials).

Only flag declarations live here; the work is in `aiperf.cli.kube_commands`, imported when a
command runs. `aiperf.cli.main` rewrites dotted mapping flags and applies `--config` files
before this app parses (`aiperf.cli.kube_config.prepare_kube_argv`).
"""

from __future__ import annotations

from typing import Annotated, Literal

import cyclopts
from cyclopts import Parameter

from aiperf.cli.kube_options import KubeDeployFlags, KubeTarget
from aiperf.cli.profile_options import ProfileFlags
from aiperf.cli.sweep_options import SWEEP_VALUES_FLAG, MultiRunFlags

Kind = Literal["job", "sweep"]
KindFlag = Annotated[Kind, Parameter(name="--kind")]
VariationFlag = Annotated[int | None, Parameter(name=["--variation", "-v"])]
TrialFlag = Annotated[int | None, Parameter(name=["--trial", "-t"])]

kube_app = cyclopts.App(
    name="kube",
    help="Run and manage benchmarks on Kubernetes: one JobSet per run (a controller pod and worker "
         "pods). Every command takes --kubeconfig, --kube-context and --namespace/-n.",
)

_TARGET = KubeTarget()
_NO_FLAGS = ProfileFlags()
_NO_MULTI = MultiRunFlags()


@kube_app.command
def init(*, target: KubeTarget = _TARGET,
         output: Annotated[str, Parameter(name=["--output", "-o"])] = "aiperf-kube.yaml",
         force: bool = False) -> int:
    """Write a starter config file for `kube generate/profile --config FILE`.

    Parameters
    ----------
    output
        File to write: YAML with comments, or JSON when the name ends in .json.
    force
        Overwrite the file when it exists.
    """
    from aiperf.cli.kube_commands import guarded
    from aiperf.cli.kube_config import write_starter_config

    def work() -> int:
        path = write_starter_config(output, target.namespace, force=force)
        print(f"wrote {path}; edit it, then `aiperf kube generate --config {path}` "
              f"or `aiperf kube profile --config {path}`")
        return 0

    return guarded(work)


@kube_app.command
def generate(flags: ProfileFlags = _NO_FLAGS, *, deploy: KubeDeployFlags, target: KubeTarget = _TARGET,
             multi: MultiRunFlags = _NO_MULTI,
             output: Annotated[str | None, Parameter(name=["--output", "-o"])] = None,
             operator: bool = False) -> int:
    """Print the manifests of a run ([ServiceAccount,] Role, RoleBinding, CURVE key Secret without
    data, ConfigMap, JobSet) as YAML; no API calls.

    Takes every `aiperf profile` flag but --workers-max (use --total-workers). Secrets (--api-key,
    --header values) never appear in the output: the pods read them from the Secrets named by
    --api-key-secret / --headers-secret / --env-from-secrets (AIPerf's AIPERF_INJECTED_API_KEY or
    OPENAI_API_KEY, AIPERF_INJECTED_HEADERS), and generation fails without them. With
    --operator, a comma list on a sweepable flag (--concurrency 4,8) or --num-profile-runs N prints
    an AIPerfSweep, as AIPerf's `kube generate` does.

    Parameters
    ----------
    output
        Write the YAML to this file instead of stdout.
    operator
        Print the run's AIPerfJob custom resource (operator mode) instead, checked against the CRD.
    """
    if multi.wanted:
        from aiperf.cli.kube_sweep import generate_sweep

        return generate_sweep(target, deploy, flags, multi, output, operator=operator)
    if operator:
        from aiperf.cli.kube_operator import generate_job

        return generate_job(target, deploy, flags, output)
    from aiperf.cli.kube_commands import generate as run

    return run(target, deploy, flags, output)


@kube_app.command
def validate(files: list[str], *,
             output_format: Annotated[Literal["text", "json"], Parameter(name=["--output", "-o"])] = "text",
             ) -> int:
    """Check AIPerfJob and AIPerfSweep files offline, as the API server and the operator would.

    Every YAML document of every FILE is checked against the generated CRD (schema and CEL rules)
    and the typed model. One line per problem; exit 0 when all are valid, 1 when one is not, 2
    when a file cannot be read or parsed.

    Parameters
    ----------
    files
        YAML files, each with one or more documents.
    output_format
        text (FILE: KIND/NAME: PATH: MESSAGE) or json (one JSON object per problem and line).
    """
    from aiperf.cli.kube_operator import validate_files

    return validate_files(files, output_format=output_format)


@kube_app.command
def profile(flags: ProfileFlags = _NO_FLAGS, *, deploy: KubeDeployFlags, target: KubeTarget = _TARGET,
            dry_run: bool = False, detach: bool = False,
            artifact_dir: Annotated[str, Parameter(name=["--artifact-dir", "--output-artifact-dir"])]
            = "artifacts", operator: bool | None = None, keep_sidecar: bool = False) -> int:
    """Run a benchmark on Kubernetes: submit the run, watch it, download its results.

    Checks the flags and that the namespace exists (it is never created). When the cluster serves
    the AIPerfJob CRD (operator mode), creates the run's AIPerfJob and the operator creates the
    rest; otherwise (direct mode) creates [ServiceAccount,] Role, RoleBinding, the CURVE key Secret
    (with a fresh key pair), ConfigMap and JobSet in that order.
    Prints each state change of the run until it ends (its control plane exits), then copies the
    result files from the controller pod's results sidecar to ARTIFACT_DIR/NAME/ and shuts the
    sidecar down (the JobSet then completes). Exit 0 when the run completed, 1 when it failed or
    was cancelled, 2 for a mistake in the flags.

    Parameters
    ----------
    dry_run
        Print the manifests exactly as `aiperf kube generate` does and stop (no API calls).
    detach
        Return once the objects are created; follow with `kube list`, `kube results`.
    artifact_dir
        Results go to ARTIFACT_DIR/NAME/.
    operator
        --operator submits an AIPerfJob without probing for the CRD; --no-operator forces direct
        mode. Default: probe (a dry run never probes: it prints the direct-mode manifests).
    keep_sidecar
        Leave the results sidecar serving after the download (`kube results --from-pods` again,
        `kube shutdown` retires it; else it exits --ttl-seconds after the run).
    """
    from aiperf.cli.kube_commands import profile as run

    return run(target, deploy, flags, dry_run=dry_run, detach=detach, artifact_dir=artifact_dir,
               operator=operator, keep_sidecar=keep_sidecar)


@kube_app.command
def sweep(flags: ProfileFlags = _NO_FLAGS, *, deploy: KubeDeployFlags, target: KubeTarget = _TARGET,
          sweep_values: Annotated[list[str] | None, Parameter(name=SWEEP_VALUES_FLAG, show=False,
                                                               consume_multiple=False)] = None,
          sweep_type: Literal["grid", "zip"] = "grid", cooldown: float = 0.0, trials: int = 1,
          trial_cooldown: float = 0.0, min_runs: int = 1, max_runs: int | None = None,
          dry_run: bool = False, detach: bool = False) -> int:
    """Run a parameter sweep on Kubernetes as an AIPerfSweep (needs the aiperf operator): one child
    AIPerfJob per variation and trial, one after another, then the sweep aggregate (per
    combination metrics, best configurations, Pareto set) on the operator's results volume.

    Takes every `kube profile` flag; comma lists on sweepable flags (--concurrency 4,8,16,
    --request-rate, --request-count, --benchmark-duration, --isl, --osl, --num-dataset-entries)
    are the swept parameters. The sweep is checked against the CRD and planned before it is
    submitted. Exit 0 completed, 1 failed or cancelled, 2 a mistake in the flags.

    Parameters
    ----------
    sweep_type
        grid (every combination of the comma lists) or zip (the i-th value of each).
    cooldown
        Seconds between variations.
    trials
        Runs of every variation (1-100); the aggregate gives each metric's confidence interval.
    trial_cooldown
        Seconds before each trial after the first.
    min_runs
        Successful trials every variation needs (at most --trials); fewer fails the sweep.
    max_runs
        Refuse a sweep that plans more child runs than this (variations x trials).
    dry_run
        Print the AIPerfSweep as YAML and stop (no API calls).
    detach
        Return once the AIPerfSweep is created.
    """
    from aiperf.cli.kube_sweep import SweepOptions, sweep_command

    options = SweepOptions(sweep_values=sweep_values, sweep_type=sweep_type, cooldown=cooldown, trials=trials,
                           trial_cooldown=trial_cooldown, min_runs=min_runs, max_runs=max_runs)
    return sweep_command(target, deploy, flags, options, dry_run=dry_run, detach=detach)


def _resolved(target: KubeTarget, name: str, kind: Kind, variation: int | None, trial: int | None) -> str | int:
    """The run a job command acts on (see `aiperf.cli.kube_sweep.resolve_name`), or the exit code."""
    from aiperf.cli.kube_commands import guarded
    from aiperf.cli.kube_sweep import resolve_name

    out: list[str] = []

    def work() -> int:
        out.append(resolve_name(target, name, kind, variation, trial))
        return 0

    code = guarded(work)
    return out[0] if out else code


@kube_app.command(name="list")
def list_(*, target: KubeTarget = _TARGET,
          all_namespaces: Annotated[bool, Parameter(name=["--all-namespaces", "-A"])] = False,
          watch: Annotated[bool, Parameter(name=["--watch", "-w"])] = False, timeout: float | None = None,
          kind: Annotated[Kind | None, Parameter(name="--kind")] = None) -> int:
    """List the runs: NAME, STATE, PROGRESS (requests done/total, when the cluster serves AIPerfJobs), AGE.

    The runs are the AIPerfJobs (operator mode; STATE is the phase: Pending, Initializing,
    Running, Completed, Failed, Cancelled) and the direct-mode JobSets (Running, Completed,
    Failed, Suspended).

    Parameters
    ----------
    all_namespaces
        List the runs of every namespace.
    watch
        After the table, print a row each time a run changes (Deleted when it goes), until
        Ctrl-C or --timeout; a cut or expired watch resumes by itself. Exit 0.
    timeout
        With --watch: stop after this many seconds.
    kind
        sweep: list the AIPerfSweeps instead (NAME, STATE, RUNS done/total, CURRENT child, AGE);
        job: the runs (the default).
    """
    if kind == "sweep":
        from aiperf.cli.kube_commands import _error
        from aiperf.cli.kube_sweep import list_sweeps

        if watch:
            _error("--watch: lists runs only; `kubectl get aiperfsweeps -w` follows sweeps")
            return 2
        return list_sweeps(target, all_namespaces=all_namespaces)
    from aiperf.cli.kube_list import list_command

    return list_command(target, all_namespaces=all_namespaces, watch=watch, timeout=timeout)


@kube_app.command
def logs(name: str, *, target: KubeTarget = _TARGET, container: str | None = None,
         tail: int | None = None, pod: str | None = None) -> int:
    """Print a container's log (default: the control-plane container of the controller pod).

    Parameters
    ----------
    name
        Run name.
    container
        Container to read (e.g. api, records-manager, results-sidecar, worker-0); default
        control-plane (the system-controller), or the only container of --pod.
    tail
        Only the last N lines.
    pod
        Read this pod instead of the controller pod (see `kubectl get pods -l
        jobset.sigs.k8s.io/jobset-name=aiperf-NAME`).
    """
    from aiperf.cli.kube_commands import logs as run

    return run(target, name, container=container, tail=tail, pod=pod)


@kube_app.command
def debug(name: str, *, target: KubeTarget = _TARGET,
          output_format: Annotated[Literal["text", "json"], Parameter(name=["--output", "-o"])] = "text") -> int:
    """Show what blocks a run: its AIPerfJob's phase, conditions and startupIssue (operator mode),
    its JobSet, each pod with its containers' states, the recent events of the run's objects, and
    a one-line verdict. Reads only; exit 0 once the report is printed.

    Parameters
    ----------
    name
        Run name.
    output_format
        text (one screen) or json (the same report as one JSON object, every event).
    """
    from aiperf.cli.kube_debug import debug as run

    return run(target, name, output_format=output_format)


@kube_app.command
def results(name: str, *, target: KubeTarget = _TARGET, from_pods: bool = False,
            artifact_dir: Annotated[str, Parameter(name=["--artifact-dir", "--output-artifact-dir"])]
            = "artifacts", epoch: str | None = None, operator_namespace: str = "aiperf-system",
            kind: KindFlag = "job", variation: VariationFlag = None, trial: TrialFlag = None) -> int:
    """Download a run's result files into ARTIFACT_DIR/NAME/.

    Operator mode (default): from the operator's results server (port 8081, through the API
    server's services proxy), once the AIPerfJob has completed: its `status.runEpoch`, or --epoch,
    or the newest stored run when the CR is gone. Direct mode: --from-pods waits until the run has
    ended (its control plane exited), then copies from the controller pod's results sidecar, which
    serves them until `kube shutdown` or --ttl-seconds after the run.

    Parameters
    ----------
    name
        Run name.
    from_pods
        Copy from the controller pod's results sidecar (direct mode, or before the operator stored it).
    artifact_dir
        Results go to ARTIFACT_DIR/NAME/.
    epoch
        A stored run other than the CR's (`GET /api/v1/results/NS/NAME/runs` lists them).
    operator_namespace
        Namespace of the aiperf-operator chart (its results server's Service).
    kind
        sweep: NAME is an AIPerfSweep: its aggregate (where the operator stored it, or from its
        sweep-controller pod before that); with -v/-t the results of that child.
    variation
        With --kind sweep: the variation (from 0) of the child.
    trial
        With --kind sweep: the trial (from 1) of the child.
    """
    from aiperf.cli.kube_commands import results as run

    if kind == "sweep" and variation is None and trial is None:
        from aiperf.cli.kube_sweep import sweep_results

        return sweep_results(target, name, artifact_dir=artifact_dir)
    resolved = _resolved(target, name, kind, variation, trial)
    if isinstance(resolved, int):
        return resolved
    return run(target, resolved, from_pods=from_pods, artifact_dir=artifact_dir, epoch=epoch,
               operator_namespace=operator_namespace)


@kube_app.command
def dashboard(*, target: KubeTarget = _TARGET, operator_namespace: str = "aiperf-system", port: int = 0,
              open_browser: Annotated[bool, Parameter(name="--open")] = True) -> int:
    """Open the operator's results dashboard: run history, live progress, charts, comparisons.

    Forwards a local port to the results server (Service aiperf-operator, port 8081, in the
    operator's namespace) through the API server's service proxy (you need get on
    services/proxy there), prints the URL and opens it in the browser. Ctrl-C stops.

    Parameters
    ----------
    operator_namespace
        Namespace the operator chart is installed in.
    port
        Local port on 127.0.0.1 (0: any free port).
    open_browser
        Open the dashboard in the default browser (--no-open: only print its URL).
    """
    from aiperf.cli.kube_dashboard import dashboard_command

    return dashboard_command(target, operator_namespace=operator_namespace, port=port, open_browser=open_browser)


@kube_app.command
def shutdown(name: str, *, target: KubeTarget = _TARGET) -> int:
    """Retire a finished run's controller pod: its results sidecar stops serving and exits, the
    run's JobSet completes (its TTL then removes it). Exit 1 while the run is still going.

    Parameters
    ----------
    name
        Run name.
    """
    from aiperf.cli.kube_commands import shutdown as run

    return run(target, name)


@kube_app.command
def cancel(name: str, *, target: KubeTarget = _TARGET, kind: KindFlag = "job", variation: VariationFlag = None,
           trial: TrialFlag = None) -> int:
    """Cancel a run: operator mode sets the AIPerfJob's spec.cancel, direct mode suspends the JobSet; its pods stop.

    Parameters
    ----------
    name
        Run name (with --kind sweep: the AIPerfSweep's).
    kind
        sweep: cancel the AIPerfSweep (its current child is cancelled, no other starts); with -v/-t
        cancel that one child only.
    variation
        With --kind sweep: the variation (from 0) of the child to cancel.
    trial
        With --kind sweep: the trial (from 1) of the child to cancel.
    """
    from aiperf.cli.kube_commands import cancel as run

    if kind == "sweep" and variation is None and trial is None:
        from aiperf.cli.kube_sweep import cancel_sweep

        return cancel_sweep(target, name)
    resolved = _resolved(target, name, kind, variation, trial)
    if isinstance(resolved, int):
        return resolved
    return run(target, resolved)


@kube_app.command
def delete(name: str, *, uid: str | None = None, target: KubeTarget = _TARGET, kind: KindFlag = "job") -> int:
    """Delete a run: its AIPerfJob (operator mode), else its JobSet (with its pods), ConfigMap,
    RoleBinding, Role and ServiceAccount. Each object is deleted only if it is still the one
    just read (UID precondition).

    Parameters
    ----------
    name
        Run name.
    uid
        Delete only if the run's JobSet has this UID (from `kube list -o json`): a newer run with
        the same name is left alone.
    kind
        sweep: delete the AIPerfSweep NAME (the operator cancels its children; they go with it).
    """
    if kind == "sweep":
        from aiperf.cli.kube_sweep import delete_sweep

        return delete_sweep(target, name, uid=uid)
    from aiperf.cli.kube_commands import delete as run

    return run(target, name, uid=uid)


@kube_app.command
def preflight(*, target: KubeTarget = _TARGET,
              env_from_secrets: Annotated[list[str] | None, Parameter(consume_multiple=False)] = None,
              api_key_secret: str | None = None, headers_secret: str | None = None,
              image_pull_secrets: Annotated[list[str] | None, Parameter(consume_multiple=False)] = None,
              ) -> int:
    """Check the cluster before a run: kubeconfig, API server, namespace, JobSet API, Secrets.

    Prints PASS or FAIL per check; exit 1 when any fails.

    Parameters
    ----------
    env_from_secrets
        ENV -> SECRET/KEY references to check (same forms as for `kube profile`).
    api_key_secret
        SECRET/KEY of the API key to check.
    headers_secret
        SECRET/KEY of the headers JSON to check.
    image_pull_secrets
        Image pull Secrets to check (repeatable or comma-separated).
    """
    from aiperf.cli.kube_commands import preflight as run

    return run(target, env_from_secrets=env_from_secrets, api_key_secret=api_key_secret,
               headers_secret=headers_secret, image_pull_secrets=image_pull_secrets)


@kube_app.command
def cleanup(*, target: KubeTarget = _TARGET, older_than: str = "0s",
            all_namespaces: Annotated[bool, Parameter(name=["--all-namespaces", "-A"])] = False,
            dry_run: bool = False, yes: Annotated[bool, Parameter(name=["--yes", "-y"])] = False) -> int:
    """Delete the finished runs: AIPerfJobs Completed, Failed or Cancelled (with what they own),
    direct-mode JobSets Completed or Failed (with their ConfigMap, Secret, RoleBinding, Role and
    ServiceAccount). Running and Suspended runs are never touched.

    Each delete is fenced on the UID just listed: a new run with the same name is kept. Prints a
    line per run deleted or kept; exit 1 when a delete failed.

    Parameters
    ----------
    older_than
        Only runs that finished at least this long ago: 90, 30s, 15m, 2h, 7d or 1h30m.
    all_namespaces
        Clean up every namespace.
    dry_run
        Print what would be deleted; delete nothing.
    yes
        Delete without asking (required when stdin is not a terminal).
    """
    from aiperf.cli.kube_cleanup import cleanup as run

    return run(target, older_than=older_than, all_namespaces=all_namespaces, dry_run=dry_run, yes=yes)


@kube_app.command
def show(name: str | None = None, *, target: KubeTarget = _TARGET,
         file: Annotated[str | None, Parameter(name=["--file", "-f"])] = None,
         output_format: Annotated[Literal["text", "yaml", "json"], Parameter(name=["--output", "-o"])] = "text",
         ) -> int:
    """Show a run's AIPerfJob: phase and sub-phase, progress, workers, startup issue, conditions,
    results path and the spec's gist. With --file, render a CR file instead, offline: `${VAR}`
    and `${VAR:-default}` resolved from the environment, checked like `kube validate`, and what
    the operator would create for it.

    Exit 0 shown, 1 a file's CR is invalid, 2 no such run or an unreadable file.

    Parameters
    ----------
    name
        Run name (the AIPerfJob's; a direct-mode run gets a one-line summary).
    file
        A YAML file of AIPerfJob/AIPerfSweep documents to render (no API calls).
    output_format
        text, or the object itself as yaml or json (a file: with its variables resolved).
    """
    from aiperf.cli.kube_commands import _error
    from aiperf.cli.kube_show import show_file, show_run

    if (name is None) == (file is None):
        _error("kube show: give a run NAME or --file PATH (one of them)")
        return 2
    if file is not None:
        return show_file(file, fmt=output_format)
    assert name is not None
    return show_run(target, name, fmt=output_format)


@kube_app.command
def attach(name: str, *, target: KubeTarget = _TARGET, interval: float = 1.0, kind: KindFlag = "job",
           variation: VariationFlag = None, trial: TrialFlag = None) -> int:
    """Follow a run's progress live: state, requests done of expected, errors, elapsed time.

    Streams the api's progress WebSocket (/ws/progress) from the run's controller pod through the
    API server's pod proxy (you need get on pods/proxy); polls /api/progress instead when the
    upgrade is refused. Waits for the controller pod to run, reconnects after a lost connection,
    and ends with the run: exit 0 completed, 1 failed or cancelled. Ctrl-C detaches; the run goes on.

    Parameters
    ----------
    name
        Run name.
    interval
        Seconds between checks while waiting for the pod, and between polls without WebSockets.
    kind
        sweep: NAME is an AIPerfSweep; follow its child -v/-t (else its current child).
    variation
        With --kind sweep: the variation (from 0) of the child.
    trial
        With --kind sweep: the trial (from 1) of the child.
    """
    from aiperf.cli.kube_attach import attach_command

    resolved = _resolved(target, name, kind, variation, trial)
    if isinstance(resolved, int):
        return resolved
    return attach_command(target, resolved, interval=interval)
