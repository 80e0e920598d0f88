#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` from the pinned llama-cpp-python sdist on PyPI (which vendors
# the whole llama.cpp tree) into a cache outside the repo, reused when present. Prints the
# cache folder on stdout; the tests of tests/real read it (or $AIPERF_LLAMA_DIR) to find:
#   <cache>/bin/llama-server       the server binary
#   <cache>/src/vendor/llama.cpp   gguf-py (the GGUF writer) and models/ggml-vocab-*.gguf
# No model and nothing from outside PyPI/apt is downloaded; the tests generate a tiny
# random-weight model from a vocab file at test time (tests/real/_model.py).
#
#   scripts/ci/llama-server.sh          # build once (~10 min on 2 cores), then ~0 s
#   AIPERF_LLAMA_CACHE=DIR scripts/ci/llama-server.sh
set -euo pipefail
VERSION="0.3.36"
CACHE="${AIPERF_LLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aiperf-llama}/$VERSION"
BIN="$CACHE/bin/llama-server"

if [ -x "$BIN" ] && [ -d "$CACHE/src/vendor/llama.cpp/gguf-py" ]; then
  echo "$CACHE"; exit 0
fi
if ! command -v cmake >/dev/null || ! command -v g++ >/dev/null || ! command -v make >/dev/null; then
  echo "llama-server.sh: installing cmake, g++, make (Debian packages)" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends cmake g++ make >&2
fi

mkdir -p "$CACHE"
WORK="$(mktemp -d "$CACHE/.build.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
echo "llama-server.sh: downloading llama-cpp-python==$VERSION (sdist) from PyPI" >&2
# --no-build-isolation/--no-deps: only the archive is wanted, not its metadata build.
PIP_CONSTRAINT="" python3 -m pip download --quiet --disable-pip-version-check --no-deps \
  --no-binary :all: --no-build-isolation "llama-cpp-python==$VERSION" -d "$WORK" >&2 \
  || PIP_CONSTRAINT="" python3 -m pip download --quiet --disable-pip-version-check --no-deps \
       --no-binary :all: "llama-cpp-python==$VERSION" -d "$WORK" >&2
tar -xzf "$WORK"/llama_cpp_python-"$VERSION".tar.gz -C "$WORK"
SRC="$WORK/llama_cpp_python-$VERSION"

echo "llama-server.sh: building llama-server (about 10 minutes on 2 cores)" >&2
cmake -S "$SRC/vendor/llama.cpp" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
  -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF >&2
cmake --build "$WORK/build" --target llama-server -j "$(nproc)" >&2

# Keep only what the tests read: the binary, gguf-py and the vocab-only models.
rm -rf "$CACHE/src" "$CACHE/bin"
mkdir -p "$CACHE/bin" "$CACHE/src/vendor/llama.cpp/models"
cp -r "$SRC/vendor/llama.cpp/gguf-py" "$CACHE/src/vendor/llama.cpp/"
cp "$SRC"/vendor/llama.cpp/models/ggml-vocab-*.gguf "$CACHE/src/vendor/llama.cpp/models/"
cp "$WORK/build/bin/llama-server" "$BIN.tmp"
mv "$BIN.tmp" "$BIN"
"$BIN" --version >&2 2>&1 || true
echo "$CACHE"
