#!/usr/bin/env bash
# Builds the base image localhost/aiperf/base:bookworm (Debian 12 minbase + python3 = 3.11)
# without Docker Hub: debootstrap from the Debian mirror, strip caches/docs, `podman import`.
# The mirror is the machine's own (scripts/images/apt-mirror.sh: the first enabled bookworm/main
# `deb` source of its apt configuration), so a local or proxying mirror works here too;
# DEBIAN_MIRROR overrides it, http://deb.debian.org/debian is the fallback. apt's proxy
# (Acquire::http(s)::Proxy) is passed on to debootstrap unless http(s)_proxy is already set.
#
#   scripts/images/build-base.sh            # skip if the image already exists in podman storage
#   scripts/images/build-base.sh --force    # re-import (reuses the cached rootfs tarball)
#   scripts/images/build-base.sh --refresh  # re-run debootstrap too (newer Debian packages)
#
# The rootfs tarball is cached in .ci-cache/base/ (git- and pants-ignored), so a rerun on a
# machine whose podman storage was wiped only re-imports it (seconds). Needs root (debootstrap,
# chroot) and scripts/images/setup-podman.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/images/env.sh
. "$ROOT/scripts/images/env.sh"

IMAGE="${AIPERF_BASE_IMAGE:-localhost/aiperf/base:bookworm}"
SUITE=bookworm
DEFAULT_MIRROR=http://deb.debian.org/debian
PYTHON_MINOR=3.11
CACHE="$ROOT/.ci-cache/base"
TARBALL="$CACHE/$SUITE-minbase-python3-rootfs.tar"

force=0; refresh=0
for a in "$@"; do
  case "$a" in
    --force) force=1 ;;
    --refresh) force=1; refresh=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "build-base: unknown argument $a" >&2; exit 2 ;;
  esac
done

if [ "$force" = 0 ] && podman image exists "$IMAGE"; then
  echo "build-base: $IMAGE already exists ($(podman image inspect --format '{{.Size}}' "$IMAGE") bytes); --force to rebuild" >&2
  exit 0
fi

mkdir -p "$CACHE"
if [ "$refresh" = 1 ] || [ ! -s "$TARBALL" ]; then
  [ "$(id -u)" -eq 0 ] || { echo "build-base: debootstrap needs root" >&2; exit 1; }
  WORK="$(mktemp -d "$CACHE/rootfs.XXXXXX")"
  ROOTFS="$WORK/rootfs"
  cleanup() {
    # debootstrap may leave proc/sys/dev mounted inside the target if it fails: unmount first,
    # and never cross into another file system while deleting.
    local m
    for m in $(awk -v r="$ROOTFS" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do
      umount -l "$m" 2>/dev/null || true
    done
    rm -rf --one-file-system "$WORK"
  }
  trap cleanup EXIT

  MIRROR="${DEBIAN_MIRROR:-$("$ROOT/scripts/images/apt-mirror.sh" "$SUITE")}"
  if [ -z "$MIRROR" ]; then
    MIRROR=$DEFAULT_MIRROR
    echo "build-base: apt has no enabled $SUITE main source; using $MIRROR (DEBIAN_MIRROR overrides)" >&2
  fi
  if command -v apt-config >/dev/null 2>&1; then
    eval "$(apt-config shell apt_http_proxy Acquire::http::Proxy apt_https_proxy Acquire::https::Proxy)"
    if [ -z "${http_proxy:-}" ] && [ -n "${apt_http_proxy:-}" ] && [ "$apt_http_proxy" != DIRECT ]; then
      export http_proxy=$apt_http_proxy
    fi
    if [ -z "${https_proxy:-}" ] && [ -n "${apt_https_proxy:-}" ] && [ "$apt_https_proxy" != DIRECT ]; then
      export https_proxy=$apt_https_proxy
    fi
  fi
  echo "build-base: debootstrap --variant=minbase --include=python3 $SUITE from $MIRROR (~1.5 min)" >&2
  debootstrap --variant=minbase --include=python3 "$SUITE" "$ROOTFS" "$MIRROR" \
    > "$WORK/debootstrap.log" 2>&1 || {
      tail -30 "$WORK/debootstrap.log" >&2
      [ -f "$ROOTFS/debootstrap/debootstrap.log" ] && tail -30 "$ROOTFS/debootstrap/debootstrap.log" >&2
      echo "build-base: debootstrap failed" >&2; exit 1
    }

  got="$(chroot "$ROOTFS" /usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  if [ "$got" != "$PYTHON_MINOR" ]; then
    echo "build-base: python3 in the rootfs is $got, expected $PYTHON_MINOR" >&2; exit 1
  fi

  # Strip what a runtime image does not need (apt caches and lists, docs, man pages, locales).
  rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/cache/apt/*.bin \
    "$ROOTFS"/var/lib/apt/lists/* \
    "$ROOTFS"/usr/share/doc "$ROOTFS"/usr/share/man "$ROOTFS"/usr/share/locale \
    "$ROOTFS"/usr/share/info "$ROOTFS"/debootstrap "$ROOTFS"/var/log/*.log
  mkdir -p "$ROOTFS/var/lib/apt/lists/partial" "$ROOTFS/usr/share/doc"
  # podman provides /dev, /proc, /sys at run time.
  find "$ROOTFS/dev" -mindepth 1 -delete 2>/dev/null || true

  tar --numeric-owner --xattrs -C "$ROOTFS" -cf "$TARBALL.tmp" .
  printf '%s\n' "$MIRROR" > "$TARBALL.mirror"
  mv "$TARBALL.tmp" "$TARBALL"
  echo "build-base: cached $TARBALL ($(du -h "$TARBALL" | cut -f1))" >&2
fi

echo "build-base: importing $TARBALL as $IMAGE" >&2
MIRROR="$(cat "$TARBALL.mirror" 2>/dev/null || echo "an unrecorded mirror")"
podman import --quiet \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["python3"]' \
  --message "aiperf base: debian $SUITE minbase + python3 ($MIRROR)" \
  "$TARBALL" "$IMAGE" >/dev/null

got="$(podman run --rm --network=none "$IMAGE" python3 -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')"
case "$got" in
  "$PYTHON_MINOR".*) echo "build-base: $IMAGE ready, python3 $got, $(podman image inspect --format '{{.Size}}' "$IMAGE") bytes" >&2 ;;
  *) echo "build-base: python3 in $IMAGE is $got, expected $PYTHON_MINOR" >&2; exit 1 ;;
esac
