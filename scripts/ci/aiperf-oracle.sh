#!/usr/bin/env bash
# Installs NVIDIA AIPerf 0.13.0 (PyPI) into its own venv, cached outside the repo, as the test
# oracle of the compatibility and real-server tiers. The product never imports it: tests run its
# `aiperf` command and read its wheel's files (templates, schema) from that venv at test time.
# Prints the venv folder on stdout; tests read it from there or from $AIPERF_ORACLE_VENV.
#
#   scripts/ci/aiperf-oracle.sh        # ~2-4 min once, then ~0 s
set -euo pipefail
VERSION="0.13.0"
VENV="${AIPERF_ORACLE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aiperf-oracle}/$VERSION"

if [ -x "$VENV/bin/aiperf" ] && [ -f "$VENV/.complete" ]; then
  echo "$VENV"; exit 0
fi
find_python311() {
  local c
  for c in "${PYTHON311:-}" "$HOME"/.pyenv/versions/3.11*/bin/python3.11 "$(command -v python3.11 || true)"; do
    if [ -n "$c" ] && [ -x "$c" ]; then echo "$c"; return 0; fi
  done
  echo "aiperf-oracle.sh: CPython 3.11 not found (AIPerf 0.13.0 needs >=3.11,<3.14)" >&2
  return 1
}
py="$(find_python311)"
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
echo "aiperf-oracle.sh: installing aiperf==$VERSION into $VENV" >&2
"$py" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "aiperf==$VERSION" >&2
"$VENV/bin/aiperf" --version >&2 2>&1 || "$VENV/bin/aiperf" --help >/dev/null
touch "$VENV/.complete"
echo "$VENV"
