"""Dependency direction, enforced: services never import each other, `aiperf.messages`
imports only msgspec (and the standard library), `aiperf.comms` imports messages but not
runtime or services, libs never import services."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SERVICES = {p.name.replace("-", "_") for p in (REPO / "services").iterdir() if p.is_dir()}
STDLIB = set(sys.stdlib_module_names) | {"__future__"}


def imports_of(package_dir: Path) -> set[tuple[Path, str]]:
    found: set[tuple[Path, str]] = set()
    for path in package_dir.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found |= {(path, alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add((path, node.module))
    return found


def first_party(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "aiperf" and len(parts) > 1 else None


def source_of(kind: str, name: str) -> Path:
    return REPO / kind / name / "aiperf" / name.replace("-", "_")


def test_repo_layout_is_seen() -> None:
    assert {"worker", "timing_manager", "system_controller"} <= SERVICES
    assert (REPO / "libs" / "messages").is_dir()


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_services_never_import_each_other(service: str) -> None:
    bad = sorted(f"{p.name}: {m}" for p, m in imports_of(source_of("services", service.replace("_", "-")))
                 if first_party(m) in SERVICES - {service})
    assert not bad


def test_messages_imports_only_msgspec() -> None:
    bad = sorted(f"{p.name}: {m}" for p, m in imports_of(source_of("libs", "messages"))
                 if m.split(".")[0] not in STDLIB | {"msgspec"} and first_party(m) != "messages")
    assert not bad


def test_comms_imports_messages_not_runtime_or_services() -> None:
    bad = sorted(f"{p.name}: {m}" for p, m in imports_of(source_of("libs", "comms"))
                 if first_party(m) not in (None, "comms", "messages"))
    assert not bad


def test_libs_never_import_services() -> None:
    for lib in (REPO / "libs").iterdir():
        if lib.is_dir() and (lib / "aiperf").is_dir():
            bad = sorted(f"{lib.name}/{p.name}: {m}" for p, m in imports_of(lib / "aiperf")
                         if first_party(m) in SERVICES)
            assert not bad


def test_checker_catches_a_violation(tmp_path: Path) -> None:
    (tmp_path / "x.py").write_text("from aiperf.worker.service import Worker\n")
    assert any(first_party(m) in SERVICES for _, m in imports_of(tmp_path))


def test_the_service_catalog_names_every_service_once_and_the_repo_agrees() -> None:
    from aiperf.config.catalog import AUXILIARY, CATALOG
    from aiperf.messages import ServiceType

    types = [spec.type for spec in CATALOG]
    assert sorted(types) == sorted(ServiceType) and len(set(types)) == len(types)
    assert types[0] is ServiceType.SYSTEM_CONTROLLER  # binds control before anything starts
    folders = {p.name for p in (REPO / "services").iterdir() if p.is_dir()}
    auxiliary = [spec.name for spec in AUXILIARY]
    assert len(set(auxiliary)) == len(auxiliary) and not set(auxiliary) & {str(t) for t in types}
    assert folders == {str(t) for t in types} | set(auxiliary)
    for spec in AUXILIARY:  # a folder, a pex and an image of its own, like every service
        folder = REPO / "services" / spec.name
        assert (folder / "Containerfile").is_file() and (folder / "BUILD").is_file()
        assert (folder / Path(*spec.module.split(".")[:-1]) / "main.py").is_file()
        assert f'aiperf_service("{spec.name}"' in (folder / "BUILD").read_text()  # image aiperf/<name>
    cli_build = (REPO / "cli" / "BUILD").read_text()
    for spec in CATALOG:
        folder = REPO / "services" / str(spec.type)
        assert (folder / "Containerfile").is_file() and (folder / "BUILD").is_file()
        assert f'aiperf_service("{spec.type}"' in (folder / "BUILD").read_text()
        assert (REPO / "services" / str(spec.type) / Path(*spec.module.split(".")[:-1]) / "main.py").is_file()
        assert f'"services/{spec.type}:lib"' in cli_build, f"cli/BUILD must depend on services/{spec.type}:lib"
