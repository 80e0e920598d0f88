#!/usr/bin/env bash
# Installs headless Chromium and its matching driver from Debian's packages (browser downloads
# are blocked here, so Selenium drives the system browser). Idempotent; no-op when both exist.
set -euo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then exit 0; fi
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
