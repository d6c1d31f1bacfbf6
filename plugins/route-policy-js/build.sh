#!/usr/bin/env bash
# Builds this plugin: plugins/route-policy-js/build.sh [OUT] (default build/route-policy-js.wasm).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../../guest-sdk/js/build.sh" "$here" "${1:-$here/build/route-policy-js.wasm}"
