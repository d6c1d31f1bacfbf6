#!/usr/bin/env bash
# Builds this plugin: plugins/reference-js/build.sh [OUT] (default build/reference-js.wasm).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../../guest-sdk/js/build.sh" "$here" "${1:-$here/build/reference-js.wasm}"
