#!/usr/bin/env bash
# Issue 5, must-show 4 (results in docs/PERFORMANCE.md): from an intent change (a file write,
# and a PUT on the intent API) to a real Envoy reporting the new version_text.
#
#   tests/bench/propagation.sh                         # 100 changes of each kind, SotW ADS
#   tests/bench/propagation.sh --api delta --changes 50
#   tests/bench/propagation.sh --replicas              # issue 18: via replica B to Envoy on A (etcd)
#
# Needs Envoy (tests/setup.sh installs it) and the wasm32 target for the reference plugin.
set -euo pipefail
cd "$(dirname "$0")/../.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
env_sh="${XDST_CACHE:-$HOME/.cache/xdst}/env.sh"
[ -f "$env_sh" ] && source "$env_sh"
cargo build -q --release -p xdst --bin xdst -p xdst-tests --bin xdst-propagation
XDST_BIN="$target/release/xdst" exec "$target/release/xdst-propagation" "$@"
