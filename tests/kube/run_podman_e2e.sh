#!/usr/bin/env bash
# Kubernetes mode as real pods: tests/kube under podman (`podman kube play`), after
# scripts/images/ci.sh has built the service images. Also builds the mock-server image.
#   tests/kube/run_podman_e2e.sh [pytest args...]
#
# Runs plain pytest on a venv of the lockfile (.venv if present, else `./pants export`), not
# `./pants test`: the test drives podman on the host (root, shared vfs storage) and its outcome
# depends on the images, which Pants does not see as inputs, so a cached pass could be stale.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
t() { local s=$SECONDS rc=0; "$@" || rc=$?; echo "podman-e2e: '$*' took $((SECONDS - s)) s" >&2; return $rc; }

t ./pants package mock:image

PY=.venv/bin/python
if [ ! -x "$PY" ]; then
  t ./pants export --resolve=python-default >/dev/null
  PY="$(ls -d dist/export/python/virtualenvs/python-default/*/bin/python | head -1)"
fi

PYTHONPATH="$(ls -d libs/* services/* cli mock operator tests | tr '\n' ':')"
export PYTHONPATH AIPERF_PODMAN_E2E=1
# One retry, of the failed tests only, loudly: 2026-12-06 both full runs of the tier failed in
# test_operator_pods.py right after test_operator_lost.py (the first run: a Completed run's status
# without `resultsExported` and the next run's controller container exiting at start-up; the
# second: the completed run's server-metrics window summing 0 of the mock's 640 tokens), and
# the same tests passed alone (three times) and as a file. The second should not recur: a
# burst of failed scrapes around a phase's end no longer loses the end while a later scrape answers (aiperf.servermetrics;
# a way it happens on this host: aardvark-dns 1.4 refused 3 of a probe's lookups, at once, while
# 12 containers started and stopped on another network; each scrape resolves the name anew;
# the tier's own pods caused no such refusal in 30 min of probing). The first was not
# reproduced (the two files in that order passed 6/6 on a loaded host, then the whole tier
# 9/9 without a retry on a quieter one); the operator tests now
# print the control plane's and the scraper's logs when they fail. A likely cause of the first,
# fixed in tests/kube/_cluster.py (2026-12-06): every pod of a run mounted one ConfigMap volume
# (podman names it after the ConfigMap) and tearing one pod down `volume rm -f`'d it, stopping the
# run's other pods; since then 10/10 without a retry. A test that fails twice
# still fails the tier. `t` keeps the command's exit status (the `if` needs it).
CACHE="$(mktemp -d)"
trap 'rm -rf "$CACHE"' EXIT
if ! t "$PY" -m pytest -q -o cache_dir="$CACHE" -s -rA tests/kube "$@"; then
  echo "podman-e2e: RETRYING the failed tests once (see the failures above: a flake to fix, not to ignore)" >&2
  t "$PY" -m pytest -q -o cache_dir="$CACHE" --last-failed --last-failed-no-failures none -s -rA tests/kube "$@"
fi
