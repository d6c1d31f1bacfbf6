#!/usr/bin/env bash
# Builds go-probe with the Go recipe: tests/plugins/go-probe/build.sh OUT_WASM
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$here/../../../guest-sdk/go/build.sh" "$here" "${1:-$here/build/go-probe.wasm}"
