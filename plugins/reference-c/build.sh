#!/usr/bin/env bash
# Builds the C port of the reference translator: build.sh [OUT], by default
# build/reference-c.wasm next to this script.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../../guest-sdk/c/build.sh" "$here" "${1:-$here/build/reference-c.wasm}"
