#!/usr/bin/env bash
# Builds this plugin: plugins/reference-python/build.sh [OUT]
# (default OUT: plugins/reference-python/build/reference-python.wasm)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../../guest-sdk/python/build.sh" "$here" "${1:-$here/build/reference-python.wasm}"
