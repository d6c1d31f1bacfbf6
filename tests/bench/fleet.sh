#!/usr/bin/env bash
# Issue 37, rows 2, 3, 5 and 6 (results in docs/PERFORMANCE.md): xdst serving Gateway API
# intent through the gateway-api plugin to Envoy-like Delta streams (xdst-loadgen), which
# sample xdst's memory, open files and CPU while EndpointSlices churn. See
# tests/src/bin/xdst-fleet.rs for what each row does.
#
#   tests/bench/fleet.sh size --routes 1000     # row 2: 100 streams, 10 changes/s, 5 min (~6 min)
#   tests/bench/fleet.sh size --routes 5000     # row 2 at 5,000 routes (~6 min)
#   tests/bench/fleet.sh groups                 # row 3: 1,000 Gateways, a node group each (~4 min)
#   tests/bench/fleet.sh churn                  # row 5: 1,000 changes/s, 10,000 streams, 60 s (~3 min)
#   tests/bench/fleet.sh soak                   # row 6: size and churn together, 30 min (~32 min)
#   tests/bench/fleet.sh soak --secs 300        # a shorter soak
#
# Needs the wasm32 target for the gateway-api plugin (tests/setup.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/../.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
env_sh="${XDST_CACHE:-$HOME/.cache/xdst}/env.sh"
[ -f "$env_sh" ] && source "$env_sh"
cargo build -q --release -p xdst --bin xdst -p xdst-tests --bin xdst-fleet --bin xdst-loadgen
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
XDST_BIN="$target/release/xdst" exec "$target/release/xdst-fleet" "$@"
