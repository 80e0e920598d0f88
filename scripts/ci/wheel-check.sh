#!/usr/bin/env bash
# The installed product, as a user gets it: builds the wheel (`./pants package :wheel`), installs
# it with pip into a fresh venv (no Pants, no pex, no repository on the path), then runs the
# `aiperf` command from there: --help, the demo (every service started from the installed
# packages, against the bundled mock), plot, kube generate and results serve on the demo's output.
#
#   scripts/ci/wheel-check.sh        # ~1-2 min (pip's own cache keeps the downloads)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

find_python311() {
  local c
  for c in "${PYTHON311:-}" "$HOME"/.pyenv/versions/3.11*/bin/python3.11 "$(command -v python3.11 || true)"; do
    if [ -n "$c" ] && [ -x "$c" ]; then echo "$c"; return 0; fi
  done
  echo "wheel-check.sh: CPython 3.11 not found" >&2
  return 1
}

rm -f dist/aiperf_actors-*.whl
./pants package :wheel
wheel="$(ls "$ROOT"/dist/aiperf_actors-*.whl)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$(find_python311)" -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check "$wheel"

cd "$work"  # nothing of the repository is importable from here
unset PYTHONPATH
aiperf="$work/venv/bin/aiperf"
where="$("$work/venv/bin/python" -c 'import aiperf.worker.main as m; print(m.__file__)')"
case "$where" in
  "$work/venv/"*) ;;
  *) echo "wheel-check.sh: aiperf.worker imported from $where, not the venv" >&2; exit 1 ;;
esac

"$aiperf" --help >/dev/null
"$aiperf" demo --concurrency 4 --request-count 40 --artifact-dir "$work/runs/demo"
for f in profile_export_aiperf.json profile_export_aiperf.csv profile_export.jsonl inputs.json; do
  test -s "$work/runs/demo/$f" || { echo "wheel-check.sh: the demo wrote no $f" >&2; exit 1; }
done
"$aiperf" plot "$work/runs/demo" --no-html
test -s "$work/runs/demo/plots/ttft_cdf.png"
"$aiperf" kube generate --name wheel-check --model m --url http://llm:8000 --endpoint-type chat \
  --concurrency 4 --request-count 10 | grep -q '^kind: JobSet'

port="$("$work/venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$aiperf" results serve "$work/runs" --port "$port" >"$work/serve.log" 2>&1 &
serve=$!
ok=0
for _ in $(seq 100); do
  if "$work/venv/bin/python" - "$port" <<'EOF'
import json, sys, urllib.request
try:
    body = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/api/v1/results", timeout=1).read()
except OSError:
    sys.exit(1)
sys.exit(0 if any(j["name"] == "demo" for j in json.loads(body)["jobs"]) else 1)
EOF
  then ok=1; break; fi
  sleep 0.1
done
kill "$serve"; wait "$serve" || true
[ "$ok" = 1 ] || { echo "wheel-check.sh: results serve did not list the demo run" >&2; cat "$work/serve.log" >&2; exit 1; }
echo "wheel-check.sh: $(basename "$wheel") installs and runs (demo, plot, kube generate, results serve)"
