"""AIPerf 0.13.0's own custom resources, read by ours as AIPerf reads them: every config template
of its wheel wrapped by its own `aiperf kube init --template NAME` into an AIPerfJob (27
manifests), and, where the template is a sweep or repeated runs (which AIPerf's `kube validate`
refuses in an AIPerfJob), the same manifest as an AIPerfSweep (6 more).

For each manifest our `kube validate` (`validate_resource`) gives AIPerf's verdict: one AIPerf
accepts passes ours and runs what AIPerf's loader reads from the template (the benchmark of each
variation, value by value); one AIPerf refuses is refused by ours for the same reason; one using
a feature we do not build is refused with one line naming it (`_templates.REFUSED`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from _oracle import Oracle, comparable, find_oracle
from _templates import REFUSED, TEMPLATES, aiperf_reading, clean_environment

from aiperf.crd.model import JOB_KIND, SWEEP_KIND, decode_spec
from aiperf.crd.validation import validate_resource
from aiperf.kuberun.sweep_plan import benchmark_of, plan_of

ENVELOPE_REFUSED = {"sweep_with_plot": "spec.plot: not supported (`aiperf plot` draws its fixed set of plots)"}
"""Refused templates whose unbuilt feature is an envelope field of the CR (not `spec.benchmark`)."""
CLUSTER_REFUSED = {"fixed_schedule": "spec.benchmark.datasets[0].path: ./data/precise_schedule.jsonl: not on a volume"}
"""Templates our `config validate` takes but whose AIPerfJob we refuse: a dataset file the run's pods
cannot read (a relative path, no volume mounted; AIPerf's `kube validate` lets it through)."""


class Manifests:
    """AIPerf's `kube init` of every template (`jobs`), their AIPerfSweep forms (`sweeps`), and
    AIPerf's `kube validate` verdict on each, by file name."""

    def __init__(self, oracle: Oracle, folder: Path) -> None:
        self.jobs: dict[str, Path] = {}
        self.sweeps: dict[str, Path] = {}
        for name in TEMPLATES:
            path = folder / "jobs" / f"{name}.yaml"
            path.parent.mkdir(exist_ok=True)
            done = oracle.run("kube", "init", "--template", name, "--job-name", name.replace("_", "-"),
                              "--output", str(path), cwd=folder)
            assert done.returncode == 0, done.stderr[-2000:]
            self.jobs[name] = path
        self.verdicts = oracle.kube_validate(list(self.jobs.values()), folder)
        for name, path in self.jobs.items():
            if not self.verdicts[path.name]["passed"]:
                doc = yaml.safe_load(path.read_text())
                sweep = folder / "sweeps" / path.name
                sweep.parent.mkdir(exist_ok=True)
                sweep.write_text(yaml.safe_dump({**doc, "kind": SWEEP_KIND}, sort_keys=False))
                self.sweeps[name] = sweep
        self.sweep_verdicts = oracle.kube_validate(list(self.sweeps.values()), folder)


@pytest.fixture(scope="module")
def oracle() -> Oracle:
    return find_oracle()


@pytest.fixture(scope="module")
def manifests(oracle: Oracle, tmp_path_factory: pytest.TempPathFactory) -> Manifests:
    return Manifests(oracle, tmp_path_factory.mktemp("manifests"))


def _refusal(name: str) -> str:
    return ENVELOPE_REFUSED.get(name) or CLUSTER_REFUSED.get(name) or f"spec.benchmark.{REFUSED[name]}"


def _ours(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], list[str]]:
    clean_environment(path, monkeypatch)
    doc = yaml.safe_load(path.read_text())
    return doc, [str(p) for p in validate_resource(doc)]


def _same_runs(doc: dict[str, Any], theirs: list[dict[str, Any]]) -> None:
    """Our reading of CR `doc` runs AIPerf's variations of the template (labels and benchmarks)."""
    spec = decode_spec(doc["spec"], doc["kind"], environ={})
    if doc["kind"] == JOB_KIND:
        assert len(theirs) == 1
        assert comparable(msgspec.to_builtins(spec.benchmark)) == comparable(theirs[0]["benchmark"])
        return
    variations = plan_of(spec).variations  # type: ignore[arg-type]
    assert [v.label for v in variations] == [t["dir_name"] for t in theirs] and len(variations) > 1
    for variation, their in zip(variations, theirs, strict=True):
        mine = benchmark_of(spec, variation)  # type: ignore[arg-type]
        assert comparable(msgspec.to_builtins(mine)) == comparable(their["benchmark"]), variation.label


def test_aiperfs_kube_init_makes_one_aiperfjob_per_template(manifests: Manifests) -> None:
    assert sorted(manifests.jobs) == sorted(TEMPLATES) and len(manifests.jobs) == 27
    refused_by_aiperf = sorted(n for n, p in manifests.jobs.items() if not manifests.verdicts[p.name]["passed"])
    # a sweep block or repeated runs in an AIPerfJob: AIPerf says "use an AIPerfSweep"
    assert refused_by_aiperf == sorted(manifests.sweeps) and len(manifests.sweeps) == 6


@pytest.mark.parametrize("name", TEMPLATES)
def test_an_aiperfjob_of_aiperfs_gets_aiperfs_verdict_and_runs_its_benchmark(
        name: str, oracle: Oracle, manifests: Manifests, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = manifests.jobs[name]
    doc, ours = _ours(path, monkeypatch)
    if not manifests.verdicts[path.name]["passed"]:
        errors = " ".join(manifests.verdicts[path.name]["errors"])
        assert ("sweep" in errors or "multiRun" in errors) and ours, (errors, ours)
        assert any(p.startswith(("spec.sweep: an AIPerfJob is one run", "spec.multiRun: multiRun: an AIPerfJob is one run"))
                   for p in ours), ours
    elif name in REFUSED or name in CLUSTER_REFUSED:
        assert len(ours) == 1 and ours[0].startswith(_refusal(name)), ours
    else:
        assert ours == []
        _same_runs(doc, aiperf_reading(oracle, name, tmp_path))


@pytest.mark.parametrize("name", ["env_var_production", "jinja2_variables", "scenario_workload_profiles",
                                  "speed_bench_sweep", "sweep_distributions", "sweep_with_plot"])
def test_the_same_template_as_an_aiperfsweep_gets_aiperfs_verdict_and_runs_its_variations(
        name: str, oracle: Oracle, manifests: Manifests, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = manifests.sweeps[name]
    doc, ours = _ours(path, monkeypatch)
    verdict = manifests.sweep_verdicts[path.name]
    if not verdict["passed"]:  # repeated runs without a sweep block: AIPerf wants `sweep:` in an AIPerfSweep
        assert "spec.sweep: required" in " ".join(verdict["errors"]) and "spec: 'sweep': required" in ours, ours
    elif name in REFUSED or name in CLUSTER_REFUSED:
        assert len(ours) == 1 and ours[0].startswith(_refusal(name)), ours
    else:
        assert ours == []
        _same_runs(doc, aiperf_reading(oracle, name, tmp_path))

