#!/usr/bin/env bash
# Installs what the image builds and the real-pods tests need (podman, buildah, runc, debootstrap,
# umoci, skopeo, and podman's network stack) from Debian apt, only if something is missing.
# Idempotent; writes nothing outside the repository except what apt-get does. The podman
# settings live in deploy/podman/*.conf (used through CONTAINERS_CONF / CONTAINERS_STORAGE_CONF,
# see scripts/images/env.sh), not in /etc.
#
#   scripts/images/setup-podman.sh
#
# Assumes Debian 12 (apt-get, dpkg) and root or sudo. When something cannot be installed it
# fails with one line naming what is missing. Checked on a bare Debian 12 minbase root file
# system by scripts/ci/fresh-check.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

die() { echo "setup-podman: $*" >&2; exit 1; }

# buildah podman umoci skopeo debootstrap runc, plus the "recommended" packages that matter here
# (installed without the rest of the recommends: no fuse-overlayfs/slirp4netns/criu needed with
# vfs as root): netavark + aardvark-dns (container networks with DNS, used by
# `podman kube play` tests), iptables (netavark runs it to set up every network; without it
# `podman run --network NET` fails with "netavark: No such file or directory"), catatonit
# (podman --init / pod infra), debian-archive-keyring (debootstrap verifies the mirror's Release
# file).
PKGS=(buildah podman umoci skopeo debootstrap runc netavark aardvark-dns iptables catatonit
      debian-archive-keyring)
# What must exist afterwards: "program-or-path package" (netavark finds iptables on PATH).
PROVIDES=(
  "podman podman" "buildah buildah" "umoci umoci" "skopeo skopeo" "debootstrap debootstrap"
  "runc runc" "conmon conmon" "/usr/lib/podman/netavark netavark"
  "/usr/lib/podman/aardvark-dns aardvark-dns" "iptables iptables"
  "/usr/libexec/podman/catatonit catatonit"
  "/usr/share/keyrings/debian-archive-keyring.gpg debian-archive-keyring"
)

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  die "needs Debian's apt-get and dpkg (Debian 12); install by hand: ${PKGS[*]}"
fi

missing=()
for pkg in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$pkg")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "not root and no sudo: run as root to install ${missing[*]}"
    SUDO=(sudo)
  fi
  echo "setup-podman: installing ${missing[*]}" >&2
  logs="$(mktemp -d "${TMPDIR:-/tmp}/setup-podman.XXXXXX")"
  trap 'rm -rf "$logs"' EXIT
  apt() { "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "$@"; }
  # apt-get update exits 0 when a source cannot be fetched: report its first warning with the
  # install error, which is then only "Unable to locate package".
  install_error() {
    local err warn
    err="$(grep -m1 '^E:' "$logs/install" || tail -1 "$logs/install")"
    warn="$(grep -m1 '^[WE]:' "$logs/update" || true)"
    echo "$err${warn:+; apt-get update: $warn}"
  }
  apt update -qq >"$logs/update" 2>&1 ||
    die "apt-get update failed ($(grep -m1 '^E:' "$logs/update" || tail -1 "$logs/update")); needed: ${missing[*]}"
  apt install -y -qq --no-install-recommends "${missing[@]}" >"$logs/install" 2>&1 ||
    die "could not install ${missing[*]} ($(install_error))"
else
  echo "setup-podman: ${PKGS[*]} already installed" >&2
fi

absent=()
for entry in "${PROVIDES[@]}"; do
  what="${entry% *}"
  case "$what" in
    /*) [ -e "$what" ] ;;
    *) PATH="$PATH:/usr/sbin:/sbin" command -v "$what" >/dev/null 2>&1 ;;
  esac || absent+=("$what (package ${entry#* })")
done
[ "${#absent[@]}" -eq 0 ] || die "missing after install: ${absent[*]}"

# Sanity check with the project configuration.
# shellcheck source=scripts/images/env.sh
. "$ROOT/scripts/images/env.sh"
podman --version
podman info --format 'storage driver={{.Store.GraphDriverName}} root={{.Store.GraphRoot}} runtime={{.Host.OCIRuntime.Name}} cgroups={{.Host.CgroupManager}} events={{.Host.EventLogger}}'
