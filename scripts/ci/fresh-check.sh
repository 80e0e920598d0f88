#!/usr/bin/env bash
# Proves that CI (.ci/run) installs everything it needs itself, on a clean root file system.
#
#   scripts/ci/fresh-check.sh          # install steps + network smoke + program check (~5 min)
#   scripts/ci/fresh-check.sh --full   # all of .ci/run in the clean root instead (~45 min)
#
# The clean root is a privileged podman container of localhost/aiperf/base:bookworm: Debian 12
# minbase + python3, debootstrapped from the mirror by scripts/images/build-base.sh, nothing else
# installed. It gets what a fresh clone has (`git archive HEAD`: uncommitted changes are left
# out) and runs, as root with CI=true:
#   1. ./pants --version                (.ci/run's bootstrap: Pants venv from PyPI, pex tool)
#   2. scripts/images/setup-podman.sh   (apt: podman & co, netavark's iptables)
#   3. scripts/images/build-base.sh     (debootstrap + podman import, nested)
#   4. network smoke, as tests/kube/_podman.py uses podman: `podman network create --internal`,
#      a server container with a network alias, a client container that resolves the alias
#      (aardvark-dns) and fetches from it (netavark + iptables)
#   5. scripts/ci/install-browser.sh (apt: chromium and chromedriver for the browser tests), and
#      a headless page load through chromedriver
#   6. every program .ci/run and the scripts it calls run is on PATH (PROGRAMS below)
# With --full, steps 1-5 are replaced by `.ci/run` itself (tests, lint, checks, images, pods).
#
# Assumes from the machine what .ci/run assumes, and shares it with the clean root: Debian 12,
# root, the Debian mirror and PyPI reachable (its TLS trust and proxy settings: the files in
# MACHINE_FILES are copied in, the variables in MACHINE_ENV passed on, where the machine has
# them), pyenv's CPython 3.9 and 3.11 in $PYENV_ROOT (default ~/.pyenv, mounted read-only at the
# same path); plus git here (for `git archive`). On the machine itself it runs setup-podman.sh
# and build-base.sh first (to have podman and the base image).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BASE_IMAGE=localhost/aiperf/base:bookworm

# Programs that .ci/run and the scripts it calls (ci.sh, setup-podman.sh, build-base.sh,
# apt-mirror.sh, run_podman_e2e.sh, ./pants, tools/docker-shim/docker, tests/kube/_podman.py)
# run, and those podman runs for them. pyenv's python3.9/3.11 come from the machine.
PROGRAMS=(
  bash sh env dirname basename cat cut du head id ls mkdir mktemp mv readlink rm sort tail tr
  chroot find grep sed awk tar umount getent dpkg-query apt-get apt-config
  debootstrap podman buildah runc conmon iptables
  /usr/lib/podman/netavark /usr/lib/podman/aardvark-dns /usr/libexec/podman/catatonit
  chromium chromedriver
)

MACHINE_FILES=(/etc/ssl/certs/ca-certificates.crt /etc/pip.conf)
MACHINE_ENV=(http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY SSL_CERT_FILE
             SSL_CERT_DIR REQUESTS_CA_BUNDLE PIP_CERT PIP_INDEX_URL PIP_EXTRA_INDEX_URL
             PIP_TRUSTED_HOST PIP_DEFAULT_TIMEOUT)

die() { echo "fresh-check: $*" >&2; exit 1; }
step() {
  local name=$1 s=$SECONDS; shift
  echo "fresh-check: == $name" >&2
  "$@" || die "$name failed"
  echo "fresh-check: $name ok ($((SECONDS - s)) s)" >&2
}

network_smoke() {
  # shellcheck source=scripts/images/env.sh
  . scripts/images/env.sh
  local net="fresh-check-$$" server="fresh-check-server-$$" rc=0
  podman network create --internal "$net" >/dev/null
  podman run -d --name "$server" --network "$net" --network-alias server.fresh-check \
    "$BASE_IMAGE" python3 -m http.server 8000 >/dev/null &&
  podman run --rm --network "$net" "$BASE_IMAGE" python3 -c '
import socket, time, urllib.request
deadline = time.monotonic() + 30
while True:
    try:
        ip = socket.gethostbyname("server.fresh-check")
        status = urllib.request.urlopen("http://server.fresh-check:8000/", timeout=2).status
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.2)
print(f"fresh-check: server.fresh-check resolved to {ip}, GET / answered {status}")
' || rc=$?
  podman rm -f -t 0 "$server" >/dev/null 2>&1 || true
  podman network rm -f "$net" >/dev/null 2>&1 || true
  return "$rc"
}

browser_smoke() {
  # What tests/browser needs of the system browser: headless Chromium, run as root in a
  # container (--no-sandbox), prints a page's DOM.
  local html
  html="$(chromium --headless --no-sandbox --disable-gpu --dump-dom \
    'data:text/html,<title>t</title><p id=x>fresh-check</p>' 2>/dev/null)"
  case "$html" in *'<p id="x">fresh-check</p>'*) echo "fresh-check: chromium $(chromium --version 2>/dev/null)" >&2 ;;
    *) echo "fresh-check: chromium printed no page: $html" >&2; return 1 ;; esac
  chromedriver --version >&2
}

check_programs() {
  local p absent=()
  for p in "${PROGRAMS[@]}"; do
    case "$p" in
      /*) [ -x "$p" ] ;;
      *) command -v "$p" >/dev/null 2>&1 ;;
    esac || absent+=("$p")
  done
  [ "${#absent[@]}" -eq 0 ] || { echo "fresh-check: not installed by the CI scripts: ${absent[*]}" >&2; return 1; }
  echo "fresh-check: all ${#PROGRAMS[@]} programs present" >&2
}

inside() {
  local full=$1 s=$SECONDS f
  for f in "${MACHINE_FILES[@]}"; do
    if [ -f "/machine$f" ]; then mkdir -p "$(dirname "$f")"; cp "/machine$f" "$f"; fi
  done
  cd /src
  export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" CI=true
  echo "fresh-check: clean root: $(. /etc/os-release && echo "$PRETTY_NAME"), $(dpkg-query -W -f='.' | wc -c) packages" >&2
  if [ "$full" = 1 ]; then
    step ".ci/run" .ci/run
  else
    step "bootstrap Pants (./pants --version)" ./pants --version
    step "scripts/images/setup-podman.sh" scripts/images/setup-podman.sh
    step "scripts/images/build-base.sh" scripts/images/build-base.sh
    step "network smoke (internal network, alias DNS, HTTP between containers)" network_smoke
    step "scripts/ci/install-browser.sh" scripts/ci/install-browser.sh
    step "headless Chromium renders a page" browser_smoke
  fi
  step "programs the CI scripts call" check_programs
  echo "fresh-check: PASSED on a clean root file system ($((SECONDS - s)) s)" >&2
}

full=0; in_container=0
for a in "$@"; do
  case "$a" in
    --full) full=1 ;;
    --inside) in_container=1 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "fresh-check: unknown argument $a" >&2; exit 2 ;;
  esac
done
if [ "$in_container" = 1 ]; then inside "$full"; exit 0; fi

[ "$(id -u)" -eq 0 ] || die "needs root (privileged podman container, nested podman)"
command -v git >/dev/null 2>&1 || die "needs git (git archive of HEAD)"
PYENV_ROOT="${PYENV_ROOT:-$HOME/.pyenv}"
ls -d "$PYENV_ROOT"/versions/3.9*/bin/python3.9 "$PYENV_ROOT"/versions/3.11*/bin/python3.11 >/dev/null 2>&1 ||
  die "needs pyenv's CPython 3.9 and 3.11 in $PYENV_ROOT/versions (as CI machines have)"

cd "$ROOT"
"$ROOT/scripts/images/setup-podman.sh" >/dev/null
"$ROOT/scripts/images/build-base.sh"
# shellcheck source=scripts/images/env.sh
. "$ROOT/scripts/images/env.sh"

WORK="$(mktemp -d /var/tmp/fresh-check.XXXXXX)"
NAME="fresh-check-$$"
cleanup() { podman rm -f -t 0 "$NAME" >/dev/null 2>&1 || true; rm -rf --one-file-system "$WORK"; }
trap cleanup EXIT
mkdir "$WORK/src"
git -C "$ROOT" archive HEAD | tar -x -C "$WORK/src"
if [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ]; then
  echo "fresh-check: checking HEAD $(git -C "$ROOT" rev-parse --short HEAD); uncommitted changes are not in it" >&2
fi

machine=()
for f in "${MACHINE_FILES[@]}"; do [ ! -f "$f" ] || machine+=(-v "$f:/machine$f:ro"); done
for v in "${MACHINE_ENV[@]}"; do [ -z "${!v:-}" ] || machine+=(-e "$v=${!v}"); done
args=(--inside); [ "$full" = 0 ] || args+=(--full)
# Own network namespace (podman's default bridge, NAT to the mirror and PyPI), so the nested
# podman's networks and iptables rules never touch the machine's. The machine's open-file limit,
# not the project's container default (4096, below what Pants asks for); giving one --ulimit
# drops all of containers.conf's, so nproc is given again.
podman run --rm --name "$NAME" --privileged "${machine[@]}" \
  --ulimit "nofile=$(ulimit -n):$(ulimit -Hn)" --ulimit nproc=4096:4096 \
  -v "$WORK/src:/src" -v "$PYENV_ROOT:$PYENV_ROOT:ro" -e HOME=/root -e PYENV_ROOT="$PYENV_ROOT" \
  "$BASE_IMAGE" bash /src/scripts/ci/fresh-check.sh "${args[@]}"
