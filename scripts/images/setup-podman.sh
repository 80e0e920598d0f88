#!/usr/bin/env bash
# Installs what the image builds need (podman, buildah, runc, debootstrap, umoci, skopeo) from
# Debian apt, only if something is missing. Idempotent; writes nothing outside the repository
# except what apt-get does. The podman settings live in deploy/podman/*.conf (used through
# CONTAINERS_CONF / CONTAINERS_STORAGE_CONF, see scripts/images/env.sh), not in /etc.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# buildah podman umoci skopeo debootstrap runc, plus the few "recommended" packages that matter
# here (installed without the rest of the recommends: no fuse-overlayfs/slirp4netns/criu needed
# with vfs as root): netavark + aardvark-dns (container networks with DNS, used by
# `podman kube play` tests), catatonit (podman --init / pod infra), debian-archive-keyring
# (debootstrap verifies the mirror's Release file).
PKGS=(buildah podman umoci skopeo debootstrap runc netavark aardvark-dns catatonit debian-archive-keyring)
missing=()
for pkg in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$pkg")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "setup-podman: installing ${missing[*]}" >&2
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
else
  echo "setup-podman: ${PKGS[*]} already installed" >&2
fi

# Sanity check with the project configuration.
# shellcheck source=scripts/images/env.sh
. "$ROOT/scripts/images/env.sh"
podman --version
podman info --format 'storage driver={{.Store.GraphDriverName}} root={{.Store.GraphRoot}} runtime={{.Host.OCIRuntime.Name}} cgroups={{.Host.CgroupManager}} events={{.Host.EventLogger}}'
