"""`aiperf kube ...`: run and manage benchmarks on Kubernetes (direct mode: ServiceAccount,
Role, RoleBinding, CURVE key Secret, ConfigMap and JobSet, created with the user's own credentials;
operator mode: an AIPerfJob or AIPerfSweep the operator reconciles).

Only flag declarations live here. A verb on an existing run is one line over the run resolved
once (`aiperf.cli.kube_runref.act`: `DirectRun`, `OperatorJob` or `OperatorSweep`); the other
commands call their module, imported when the command runs. `aiperf.cli.main` rewrites dotted
mapping flags and applies `--config` files before this app parses
(`aiperf.cli.kube_config.prepare_kube_argv`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Literal

import cyclopts
from cyclopts import Parameter

from aiperf.cli.kube_options import KubeDeployFlags, KubeTarget
from aiperf.cli.kube_selector import Kind, Selector
from aiperf.cli.profile_options import ProfileFlags
from aiperf.cli.sweep_options import SWEEP_VALUES_FLAG, MultiRunFlags

if TYPE_CHECKING:  # the work is imported when a command runs: `aiperf --help` stays fast
    from aiperf.cli.kube_runref import RunRef

KindFlag = Annotated[Kind, Parameter(name="--kind", help=(
    "sweep: NAME is an AIPerfSweep: the verb acts on the sweep (results: its aggregate; logs: its "
    "sweep-controller; attach, debug: its current child), or with -v/-t on that child."))]
VariationFlag = Annotated[int | None, Parameter(name=["--variation", "-v"], help=(
    "With --kind sweep: the variation (from 0) of the child."))]
TrialFlag = Annotated[int | None, Parameter(name=["--trial", "-t"], help=(
    "With --kind sweep: the trial (from 1) of the child."))]
FormatFlag = Annotated[Literal["text", "json"], Parameter(name=["--output", "-o"], help=(
    "text (one screen) or json (the same report as one JSON object)."))]
ArtifactDirFlag = Annotated[str, Parameter(name=["--artifact-dir", "--output-artifact-dir"],
                                           help="Results go to ARTIFACT_DIR/NAME/.")]

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
    from aiperf.cli.kube_config import write_starter_config
    from aiperf.cli.kube_shared import guarded

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
    from aiperf.cli.kube_deploy import generate as run

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
            artifact_dir: ArtifactDirFlag = "artifacts", operator: bool | None = None,
            keep_sidecar: bool = False) -> int:
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
    from aiperf.cli.kube_profile import profile as run

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


def _act(target: KubeTarget, selector: Selector, verb: Callable[[RunRef], Awaitable[int]]) -> int:
    from aiperf.cli.kube_runref import act

    return act(target, selector, verb)


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
    from aiperf.cli.kube_shared import EXIT_USER_ERROR, error

    if kind == "sweep":
        from aiperf.cli.kube_sweep import list_sweeps

        if watch:
            error("--watch: lists runs only; `kubectl get aiperfsweeps -w` follows sweeps")
            return EXIT_USER_ERROR
        return list_sweeps(target, all_namespaces=all_namespaces)
    from aiperf.cli.kube_list import list_command

    return list_command(target, all_namespaces=all_namespaces, follow=watch, timeout=timeout)


@kube_app.command
def logs(name: str, *, target: KubeTarget = _TARGET, container: str | None = None, tail: int | None = None,
         pod: str | None = None, kind: KindFlag = "job", variation: VariationFlag = None,
         trial: TrialFlag = None) -> int:
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
        Read this pod instead (`kubectl get pods -l jobset.sigs.k8s.io/jobset-name=aiperf-NAME`).
    """
    from aiperf.cli.kube_pods import LogsOptions
    from aiperf.cli.kube_shared import EXIT_USER_ERROR, error

    if tail is not None and tail < 0:
        error(f"--tail {tail}: must not be negative")
        return EXIT_USER_ERROR
    options = LogsOptions(container=container, tail=tail, pod=pod)
    return _act(target, Selector(name, kind, variation, trial), lambda run: run.logs(options))


@kube_app.command
def debug(name: str, *, target: KubeTarget = _TARGET, output_format: FormatFlag = "text", kind: KindFlag = "job",
          variation: VariationFlag = None, trial: TrialFlag = None) -> int:
    """Show what blocks a run: its AIPerfJob's phase, conditions and startupIssue (operator mode),
    its JobSet, each pod with its containers' states, the recent events of the run's objects, and
    a one-line verdict. Reads only; exit 0 once the report is printed.

    Parameters
    ----------
    name
        Run name.
    """
    return _act(target, Selector(name, kind, variation, trial), lambda run: run.debug(output_format))


@kube_app.command
def results(name: str, *, target: KubeTarget = _TARGET, from_pods: bool = False,
            artifact_dir: ArtifactDirFlag = "artifacts", epoch: str | None = None,
            operator_namespace: str = "aiperf-system", kind: KindFlag = "job", variation: VariationFlag = None,
            trial: TrialFlag = None) -> int:
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
    epoch
        A stored run other than the CR's (`GET /api/v1/results/NS/NAME/runs` lists them).
    operator_namespace
        Namespace of the aiperf-operator chart (its results server's Service).
    """
    from aiperf.cli.kube_pods import ResultsOptions
    from aiperf.cli.kube_shared import EXIT_USER_ERROR, error
    from aiperf.results.keys import is_key

    if epoch is not None and not is_key(epoch):
        error(f"--epoch {epoch!r}: a run epoch is 9-10 digits, optionally followed by 6 more "
              f"(`GET /api/v1/results/NS/{name}/runs` lists them)")
        return EXIT_USER_ERROR
    if epoch is not None and from_pods:
        error("--epoch picks a run stored by the operator; --from-pods reads the run's controller pod")
        return EXIT_USER_ERROR
    options = ResultsOptions(artifact_dir=artifact_dir, from_pods=from_pods, epoch=epoch,
                             operator_namespace=operator_namespace)
    return _act(target, Selector(name, kind, variation, trial), lambda run: run.results(options))


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
def shutdown(name: str, *, target: KubeTarget = _TARGET, kind: KindFlag = "job", variation: VariationFlag = None,
             trial: TrialFlag = None) -> int:
    """Retire a finished run's controller pod: its results sidecar stops serving and exits, the
    run's JobSet completes (its TTL then removes it). Exit 1 while the run is still going.

    Parameters
    ----------
    name
        Run name.
    """
    return _act(target, Selector(name, kind, variation, trial), lambda run: run.shutdown())


@kube_app.command
def cancel(name: str, *, target: KubeTarget = _TARGET, kind: KindFlag = "job", variation: VariationFlag = None,
           trial: TrialFlag = None) -> int:
    """Cancel a run: operator mode sets the AIPerfJob's spec.cancel, direct mode suspends the JobSet; its pods stop.

    With --kind sweep the AIPerfSweep is cancelled: its current child is cancelled, no other starts.

    Parameters
    ----------
    name
        Run name (with --kind sweep: the AIPerfSweep's).
    """
    return _act(target, Selector(name, kind, variation, trial), lambda run: run.cancel())


@kube_app.command
def delete(name: str, *, uid: str | None = None, target: KubeTarget = _TARGET, kind: KindFlag = "job",
           variation: VariationFlag = None, trial: TrialFlag = None) -> int:
    """Delete a run: its AIPerfJob (operator mode), else its JobSet (with its pods), ConfigMap,
    RoleBinding, Role and ServiceAccount. Each object is deleted only if it is still the one
    just read (UID precondition). With --kind sweep: the AIPerfSweep (the operator cancels its
    children; they go with it).

    Parameters
    ----------
    name
        Run name.
    uid
        Delete only if the run (its JobSet, or its CR) has this UID (from `kube list -o json`): a
        newer run with the same name is left alone.
    """
    return _act(target, Selector(name, kind, variation, trial), lambda run: run.delete(uid))


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
    from aiperf.cli.kube_preflight import preflight as run

    return run(target, env_from_secrets=env_from_secrets, api_key_secret=api_key_secret,
               headers_secret=headers_secret, image_pull_secrets=image_pull_secrets)


@kube_app.command
def cleanup(*, target: KubeTarget = _TARGET, older_than: str = "0s",
            all_namespaces: Annotated[bool, Parameter(name=["--all-namespaces", "-A"])] = False,
            dry_run: bool = False, yes: Annotated[bool, Parameter(name=["--yes", "-y"])] = False) -> int:
    """Delete the finished runs: AIPerfJobs Completed, Failed or Cancelled (with what they own),
    direct-mode JobSets Completed or Failed (with their ConfigMap, Secret, RoleBinding, Role and
    ServiceAccount). Running and Suspended runs are never touched; each delete is fenced on the
    UID just listed. Prints a line per run deleted or kept; exit 1 when a delete failed.

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
         kind: KindFlag = "job", variation: VariationFlag = None, trial: TrialFlag = None) -> int:
    """Show a run's AIPerfJob (phase and sub-phase, progress, workers, startup issue, conditions,
    results path, the spec's gist) or, with --kind sweep, its AIPerfSweep. With --file, render a CR
    file instead, offline: `${VAR}` and `${VAR:-default}` resolved from the environment, checked
    like `kube validate`, and what the operator would create for it. Exit 0 shown, 1 a file's CR
    is invalid, 2 no such run or an unreadable file.

    Parameters
    ----------
    name
        Run name (the AIPerfJob's; a direct-mode run gets a one-line summary).
    file
        A YAML file of AIPerfJob/AIPerfSweep documents to render (no API calls).
    output_format
        text, or the object itself as yaml or json (a file: with its variables resolved).
    """
    from aiperf.cli.kube_shared import EXIT_USER_ERROR, error
    from aiperf.cli.kube_show import show_file

    if (name is None) == (file is None):
        error("kube show: give a run NAME or --file PATH (one of them)")
        return EXIT_USER_ERROR
    if file is not None:
        return show_file(file, fmt=output_format)
    assert name is not None
    return _act(target, Selector(name, kind, variation, trial), lambda run: run.show(output_format))


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
    """
    from aiperf.cli.kube_attach import renderer_for
    from aiperf.cli.kube_shared import EXIT_USER_ERROR, error, interruptible

    if interval <= 0:
        error(f"--interval {interval}: must be more than 0 seconds")
        return EXIT_USER_ERROR
    renderer = renderer_for(name)
    try:
        return interruptible(lambda: _act(target, Selector(name, kind, variation, trial),
                                          lambda run: run.attach(renderer, interval)),
                             f"detached; the run goes on (`aiperf kube attach {name}` again)")
    finally:
        renderer.close()
