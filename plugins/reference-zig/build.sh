#!/usr/bin/env bash
# Builds this plugin: plugins/reference-zig/build.sh [OUT] (default build/reference-zig.wasm).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../../guest-sdk/zig/build.sh" "$here" "${1:-$here/build/reference-zig.wasm}"
