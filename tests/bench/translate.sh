#!/usr/bin/env bash
# Issue 3, must-show 6 (results in docs/PERFORMANCE.md): 10,000 services through the
# reference plugin in wasm and compiled natively; full translation and single-service changes.
#
#   tests/bench/translate.sh                      # 10,000 services, 5 full runs, 20 changes
#   tests/bench/translate.sh --services 1000 --runs 3 --changes 10
#   tests/bench/translate.sh --gateway-api        # issue 36: 5,000 HTTPRoutes over 1,000 Services
set -euo pipefail
cd "$(dirname "$0")/../.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
plugin=reference
for a in "$@"; do [ "$a" = --gateway-api ] && plugin=gateway-api; done
cargo build -q --release --target wasm32-unknown-unknown -p "xdst-plugin-$plugin"
cargo build -q --release -p xdst-bench-translate
exec "$target/release/xdst-bench-translate" --wasm "$target/wasm32-unknown-unknown/release/xdst_plugin_${plugin//-/_}.wasm" "$@"
