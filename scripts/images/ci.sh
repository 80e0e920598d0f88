#!/usr/bin/env bash
# CI entry point for pex binaries + container images (no Docker daemon; podman via the shim).
#   scripts/images/ci.sh [--save]
# 1. apt-installs podman & co. if missing   2. builds localhost/aiperf/base:bookworm if missing
# 3. ./pants package ::  (all pex binaries and the localhost/aiperf/<svc>:latest image of every service)
# 4. removes dangling images left by earlier builds (vfs stores full copies: they add up fast)
# 5. smoke test: every service image prints its --help   6. (--save) dist/images/<svc>.oci.tar
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
save=0; [ "${1:-}" = "--save" ] && save=1

t() { local s=$SECONDS; "$@"; echo "ci: '$*' took $((SECONDS - s)) s" >&2; }

t scripts/images/setup-podman.sh
t scripts/images/build-base.sh
t ./pants package ::

D=tools/docker-shim/docker
# A build interrupted earlier (a killed Pants run) can leave a buildah working container holding
# a dangling image; pruning is housekeeping, so that never fails the check below.
$D image prune -f >/dev/null || echo "ci: image prune skipped (an image is in use by a leftover container)" >&2

fail=0
for dir in services/*/; do
  svc="$(basename "$dir")"
  [ -f "$dir/Containerfile" ] || continue
  img="localhost/aiperf/$svc:latest"
  if out="$($D run --rm --network=none "$img" --help 2>&1)" && grep -q "^usage: $svc" <<<"$out"; then
    echo "ci: $img ok ($($D image inspect --format '{{.Size}}' "$img") bytes)" >&2
  else
    echo "ci: $img --help failed:" >&2; echo "$out" | tail -20 >&2; fail=1
  fi
done
[ "$fail" = 0 ] || exit 1

if [ "$save" = 1 ]; then t scripts/images/save-images.sh; fi
