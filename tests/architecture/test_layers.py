"""The layering of the repository, as code (the rules ARCHITECTURE.md and the BUILD comments state):

- libs: each may import only the libs `LIBS` allows it (a DAG, checked acyclic), never a service,
  the CLI, the operator or the mock;
- services: libs only (plus their own package), never each other, the CLI or the operator;
- the operator: libs only, never a service, the CLI or the mock;
- the CLI: libs, the system-controller (it runs the controller in-process), the mock and the dev
  fakes; every other service only by name at run time (`aiperf service TYPE`, the catalog);
- no module imports a private name (`_x`) of another module;
- every kube verb (a command of `aiperf.cli.kube_app`, a method of a `RunRef`) and every other
  function of the kube CLI modules (`cli/aiperf/cli/kube*.py`) stays under 40 lines.

The checker reads the sources (`ast`), so a rule holds for code that is never imported in a test.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STDLIB = set(sys.stdlib_module_names) | {"__future__"}

LIBS: dict[str, set[str]] = {
    "messages": set(),
    "tokenizer": set(),
    "kubeapi": set(),
    "dashboard": set(),
    "plot": set(),
    "results": set(),
    "comms": {"messages"},
    "config": {"messages"},
    "progress": {"messages"},
    "runtime": {"comms", "config", "messages", "tokenizer"},
    "dataset": {"config", "tokenizer"},
    "issuing": {"comms", "config", "dataset", "messages", "runtime"},
    "endpoints": {"config", "messages"},
    "metrics": {"endpoints", "messages"},
    "servermetrics": {"comms", "config", "messages", "metrics"},
    "kube": {"comms", "config", "messages", "runtime"},
    "crd": {"config", "kube", "messages"},
    "kuberun": {"config", "crd", "kube", "kubeapi", "runtime"},
    "testing": {"comms", "config", "dataset", "endpoints", "kubeapi", "messages", "metrics", "results", "runtime"},
}
"""Each lib (its folder under libs/) and the libs it may import. The kube side: `kubeapi` is the
client and knows nothing of aiperf; `kube` builds manifests (pure); `crd` is the custom resources'
models, generator and validator; `kuberun` runs aiperf's objects through `kubeapi`."""

CLI_SERVICES = {"system_controller"}
"""Services the CLI imports itself (the controller runs in the `aiperf profile` process)."""
CLI_EXTRAS = {"mock_server", "testing"}
"""Other packages the CLI imports: the bundled mock server and the dev fakes."""


def packages_of(folder: Path) -> set[str]:
    """The `aiperf.<name>` packages and modules a source root provides."""
    return {p.stem for p in (folder / "aiperf").iterdir() if p.suffix == ".py" or p.is_dir()} - {"__pycache__"}


def lib_of() -> dict[str, str]:
    """`aiperf.<package>` -> the lib folder that provides it."""
    return {pkg: lib.name for lib in (REPO / "libs").iterdir() if (lib / "aiperf").is_dir() for pkg in packages_of(lib)}


def service_packages() -> dict[str, str]:
    """`aiperf.<package>` -> its service folder."""
    return {pkg: svc.name for svc in (REPO / "services").iterdir() if (svc / "aiperf").is_dir()
            for pkg in packages_of(svc)}


def sources(folder: Path) -> Iterator[Path]:
    """The shipped sources under `folder` (tests left out: they may reach across on purpose)."""
    yield from (p for p in folder.rglob("*.py") if "tests" not in p.relative_to(folder).parts)


def imports_of(path: Path) -> Iterator[tuple[str, list[str]]]:
    """(module, names) of every absolute import in `path` (names empty for `import x`)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, [alias.name for alias in node.names]


def first_party(module: str) -> str | None:
    """`aiperf.<x>...` -> `x`; None for anything else."""
    parts = module.split(".")
    return parts[1] if parts[0] == "aiperf" and len(parts) > 1 else None


def reached(folder: Path) -> set[tuple[str, str]]:
    """(file, aiperf package) of every first-party import of the shipped sources under `folder`."""
    return {(str(p.relative_to(REPO)), pkg) for p in sources(folder) for module, _ in imports_of(p)
            if (pkg := first_party(module)) is not None}


def test_the_lib_layers_are_a_dag_and_name_every_lib() -> None:
    assert set(LIBS) == {lib.name for lib in (REPO / "libs").iterdir() if (lib / "aiperf").is_dir()}
    try:
        tuple(TopologicalSorter(LIBS).static_order())
    except CycleError as exc:  # pragma: no cover - the failure message
        pytest.fail(f"the lib layers have a cycle: {exc.args[1]}")


@pytest.mark.parametrize("lib", sorted(LIBS))
def test_a_lib_imports_only_the_libs_below_it(lib: str) -> None:
    owner = lib_of()
    allowed = LIBS[lib] | {lib}
    bad = sorted(f"{path}: aiperf.{pkg}" for path, pkg in reached(REPO / "libs" / lib)
                 if owner.get(pkg) not in allowed)
    assert not bad, f"libs/{lib} may import only {sorted(LIBS[lib])}"


@pytest.mark.parametrize("service", sorted(p.name for p in (REPO / "services").iterdir() if (p / "aiperf").is_dir()))
def test_a_service_imports_only_libs(service: str) -> None:
    owner, own = lib_of(), packages_of(REPO / "services" / service)
    bad = sorted(f"{path}: aiperf.{pkg}" for path, pkg in reached(REPO / "services" / service)
                 if pkg not in own and pkg not in owner)
    assert not bad, "a service imports libs only: never another service, the CLI, the operator or the mock"


def test_the_operator_imports_only_libs() -> None:
    owner, own = lib_of(), packages_of(REPO / "operator")
    bad = sorted(f"{path}: aiperf.{pkg}" for path, pkg in reached(REPO / "operator") if pkg not in own | set(owner))
    assert not bad, "the operator imports libs only (it runs services as containers, by image)"


def test_the_cli_imports_other_services_only_by_name() -> None:
    owner, own = lib_of(), packages_of(REPO / "cli")
    allowed = own | set(owner) | CLI_SERVICES | CLI_EXTRAS
    bad = sorted(f"{path}: aiperf.{pkg}" for path, pkg in reached(REPO / "cli") if pkg not in allowed)
    assert not bad, "the CLI starts services by name (aiperf service TYPE, the catalog), never by import"
    assert set(service_packages()) & CLI_SERVICES == CLI_SERVICES


ROOTS = ("libs", "services", "cli", "operator", "mock", "tests", "scripts")


def all_sources() -> Iterator[Path]:
    """Every Python file of the repository's source roots, tests included."""
    for root in ROOTS:
        yield from (p for p in (REPO / root).rglob("*.py") if "__pycache__" not in p.parts)


def module_of(path: Path) -> str | None:
    """The dotted name of the `aiperf` module at `path`; None for a file outside the namespace
    (a test, a script)."""
    parts = path.with_suffix("").parts
    return ".".join(parts[len(parts) - 1 - parts[::-1].index("aiperf"):]) if "aiperf" in parts else None


def private(name: str) -> bool:
    """`_x` is private; a dunder is not."""
    return name.startswith("_") and not name.startswith("__")


def private_imports(path: Path) -> Iterator[str]:
    """Each first-party import of `path` that reaches a private name of another module: a private
    name imported (`from aiperf.x import _y`), or a module path through a private module
    (`aiperf.x._y`) from outside the package that holds it."""
    importer = module_of(path) or ""
    for module, names in imports_of(path):
        if first_party(module) is None:
            continue
        parts = module.split(".")
        for i, part in enumerate(parts):
            if private(part) and not importer.startswith(".".join(parts[:i]) + "."):
                yield f"import of {module}"
                break
        yield from (f"from {module} import {name}" for name in names if private(name))


def test_no_module_imports_a_private_name_of_another() -> None:
    bad = sorted(f"{p.relative_to(REPO)}: {found}" for p in all_sources() for found in private_imports(p))
    assert not bad, "what another module uses is public: give it a name without the underscore"


def test_the_private_name_check_reads_every_root_tests_included() -> None:
    """The check above is only as good as what it reads: under Pants, the sandbox must hold every
    root's sources and tests (tests/BUILD and the root `layout` target put them there)."""
    seen = [p.relative_to(REPO).parts for p in all_sources()]
    assert {parts[0] for parts in seen} == set(ROOTS)
    assert {parts[0] for parts in seen if "tests" in parts[1:]} == {"libs", "services", "cli", "operator", "mock"}
    tested = {parts[:2] for parts in seen if parts[0] in ("libs", "services") and "tests" in parts}
    assert tested >= {("libs", lib) for lib in LIBS}, "every lib's tests are read"


KUBE_CLI = REPO / "cli" / "aiperf" / "cli"
VERB_MODULES = ("kube_app.py", "kube_run_direct.py", "kube_run_job.py", "kube_run_sweep.py")
"""The verbs themselves: the commands of `kube_app` and the methods of each `RunRef`."""
MAX_VERB_LINES = 40


def long_functions(path: Path, limit: int) -> list[str]:
    """`name: N lines` of each function (nested ones too) of `path` of `limit` lines or more,
    counted from its `def` to its last line."""
    tree = ast.parse(path.read_text())
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return sorted(f"{n.name}: {n.end_lineno - n.lineno + 1} lines" for n in functions
                  if n.end_lineno is not None and n.end_lineno - n.lineno + 1 >= limit)


@pytest.mark.parametrize("module", sorted(p.name for p in KUBE_CLI.glob("kube*.py")))
def test_every_kube_cli_function_is_short(module: str) -> None:
    """Every function of the kube CLI modules (the verbs, and what they call) stays under the
    limit: a longer one is split into named steps."""
    assert not long_functions(KUBE_CLI / module, MAX_VERB_LINES), \
        f"a kube verb is one short function over a RunRef, its helpers short too (under {MAX_VERB_LINES} lines)"


def test_the_kube_verb_modules_are_checked(tmp_path: Path) -> None:
    assert set(VERB_MODULES) <= {p.name for p in KUBE_CLI.glob("kube*.py")}
    long = tmp_path / "kube_x.py"
    long.write_text("def verb():\n" + "    pass\n" * (MAX_VERB_LINES - 1))
    assert long_functions(long, MAX_VERB_LINES) == [f"verb: {MAX_VERB_LINES} lines"]


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "x.py"
    bad.write_text("from aiperf.worker.service import Worker\nfrom aiperf.kube.names import _hidden\n")
    found = list(imports_of(bad))
    assert first_party(found[0][0]) == "worker" and found[1][1] == ["_hidden"]
    assert "worker" in service_packages() and lib_of()["kubeapi"] == "kubeapi"
    assert list(private_imports(bad)) == ["from aiperf.kube.names import _hidden"]


def test_the_checker_sees_a_private_module_used_from_outside_its_package(tmp_path: Path) -> None:
    reach = "from aiperf.dataset._text import CORPUS\nimport aiperf.dataset._text\n"
    outside, inside = tmp_path / "tests" / "conftest.py", tmp_path / "aiperf" / "dataset" / "prompts.py"
    for path in (outside, inside):
        path.parent.mkdir(parents=True)
        path.write_text(reach)
    assert list(private_imports(outside)) == ["import of aiperf.dataset._text"] * 2
    assert list(private_imports(inside)) == []
