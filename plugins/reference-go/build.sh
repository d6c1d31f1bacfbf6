#!/usr/bin/env bash
# Builds this plugin: plugins/reference-go/build.sh [OUT] (default build/reference-go.wasm).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../../guest-sdk/go/build.sh" "$here" "${1:-$here/build/reference-go.wasm}"
