"""scripts/images/apt-mirror.sh: the Debian mirror build-base.sh debootstraps from is the one the
machine's apt uses (one-line sources.list entries and deb822 .sources files)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts/images/apt-mirror.sh"

pytestmark = pytest.mark.skipif(shutil.which("apt-config", path="/usr/bin:/bin") is None,
                                reason="needs Debian's apt-config (APT_CONFIG selects the test's sources)")


def mirror(root: Path, *, sources_list: str = "", parts: dict[str, str] | None = None,
           suite: str = "bookworm") -> str:
    """The script's answer for an apt configuration (written under `root`) of these files only."""
    (root / "sources.list.d").mkdir(parents=True)
    if sources_list:
        (root / "sources.list").write_text(sources_list)
    for name, text in (parts or {}).items():
        (root / "sources.list.d" / name).write_text(text)
    conf = root / "apt.conf"
    conf.write_text(f'Dir::Etc::sourcelist "{root / "sources.list"}";\n'
                    f'Dir::Etc::sourceparts "{root / "sources.list.d"}";\n')
    result = subprocess.run(["/bin/bash", str(SCRIPT), suite], env={"APT_CONFIG": str(conf)},
                            capture_output=True, text=True, check=True)
    return result.stdout.strip()


def test_one_line_entries_with_options_and_comments(tmp_path: Path) -> None:
    assert mirror(tmp_path, sources_list=(
        "# deb http://commented/debian bookworm main\n"
        "deb-src http://sources-only/debian bookworm main\n"
        "deb http://contrib-only/debian bookworm contrib\n"
        "deb [ arch=amd64 signed-by=/k.gpg ] http://local.mirror:3142/debian bookworm main contrib # ours\n"
        "deb http://later/debian bookworm main\n")) == "http://local.mirror:3142/debian"


def test_deb822_skips_disabled_and_reads_folded_fields(tmp_path: Path) -> None:
    assert mirror(tmp_path, parts={
        "a.sources": ("Types: deb\nURIs: http://disabled/debian\nSuites: bookworm\nComponents: main\n"
                      "Enabled: no\n\n"
                      "# a comment\nTypes: deb-src deb\nURIs: mirror+file:/etc/apt/mirrors.txt\n"
                      " http://second/debian/\nSuites: bookworm-updates\n bookworm\nComponents: main\n"),
    }) == "http://second/debian/"


def test_other_suites_and_security_are_not_the_mirror(tmp_path: Path) -> None:
    parts = {"debian.sources": ("Types: deb\nURIs: http://deb.example/debian-security\n"
                                "Suites: bookworm-security\nComponents: main\n\n"
                                "Types: deb\nURIs: http://deb.example/debian\nSuites: trixie\n"
                                "Components: main")}
    assert mirror(tmp_path / "bookworm", parts=parts) == ""
    assert mirror(tmp_path / "trixie", parts=parts, suite="trixie") == "http://deb.example/debian"


def test_sources_list_comes_before_the_parts_directory(tmp_path: Path) -> None:
    assert mirror(tmp_path, sources_list="deb http://first/debian bookworm main\n",
                  parts={"a.list": "deb http://second/debian bookworm main\n"}) == "http://first/debian"
