#!/usr/bin/env bash
# Saves the built service images (localhost/aiperf/*:latest, not the base) as OCI archives:
# dist/images/<svc>.oci.tar, one per image (oci-archive holds one image).
#   scripts/images/save-images.sh [--with-base] [IMAGE...]
# Load elsewhere with `podman load -i dist/images/<svc>.oci.tar` (or skopeo copy oci-archive:...).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/images/env.sh
. "$ROOT/scripts/images/env.sh"
OUT="$ROOT/dist/images"

with_base=0; images=()
for a in "$@"; do
  case "$a" in
    --with-base) with_base=1 ;;
    *) images+=("$a") ;;
  esac
done
if [ "${#images[@]}" -eq 0 ]; then
  mapfile -t images < <(podman images --noheading --filter 'reference=localhost/aiperf/*:latest' \
    --format '{{.Repository}}:{{.Tag}}' | sort -u)
  if [ "$with_base" = 1 ]; then images+=("localhost/aiperf/base:bookworm"); fi
fi
[ "${#images[@]}" -gt 0 ] || { echo "save-images: no localhost/aiperf/* images; run ./pants package ::" >&2; exit 1; }

mkdir -p "$OUT"
for img in "${images[@]}"; do
  name="${img#localhost/aiperf/}"; name="${name%%:*}"
  rm -f "$OUT/$name.oci.tar"
  podman save --quiet --format oci-archive -o "$OUT/$name.oci.tar" "$img"
  echo "$OUT/$name.oci.tar $(du -h "$OUT/$name.oci.tar" | cut -f1) $img"
done
