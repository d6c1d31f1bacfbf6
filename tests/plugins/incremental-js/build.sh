#!/usr/bin/env bash
# Builds incremental-js with the JavaScript recipe against contract 0.4.0:
# tests/plugins/incremental-js/build.sh OUT_WASM
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
XDST_WIT="$here/../../../proto/wit/xdst-plugin-0.4.0" \
  exec bash "$here/../../../guest-sdk/js/build.sh" "$here" "${1:-$here/build/incremental-js.wasm}"
