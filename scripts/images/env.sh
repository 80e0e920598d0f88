# Source this (`. scripts/images/env.sh`) to run podman/buildah by hand with the project
# settings (same as tools/docker-shim/docker). Works from bash and zsh.
_aiperf_root="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/../.." && pwd)"
export CONTAINERS_CONF="$_aiperf_root/deploy/podman/containers.conf"
export CONTAINERS_STORAGE_CONF="$_aiperf_root/deploy/podman/storage.conf"
export BUILDAH_ISOLATION=chroot
unset _aiperf_root
