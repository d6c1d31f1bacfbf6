#!/usr/bin/env bash
# Builds this plugin with the AssemblyScript recipe: build.sh [OUT]
# (default OUT: build/reference-assemblyscript.wasm beside this script).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../../guest-sdk/assemblyscript/build.sh" "$here" "${1:-$here/build/reference-assemblyscript.wasm}"
