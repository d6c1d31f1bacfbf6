#!/usr/bin/env bash
# Issue 37, row 1 (results in docs/PERFORMANCE.md, "A new route to its first 200"): a real
# Envoy serving a Gateway API Gateway with 50, 1,000 and 5,000 HTTPRoutes under 500 requests/s;
# 100 new routes through the intent API and 100 as files, each polled every millisecond until
# its first 200; then 10 in-place changes of one route 200 ms apart. See
# tests/src/bin/xdst-first200.rs for what is counted. About 8 minutes on 2 cores.
#
#   tests/bench/first200.sh
#   tests/bench/first200.sh --routes 5000 --additions 20 --api-only
#
# Needs Envoy (tests/setup.sh installs it) and the wasm32 target for the gateway-api plugin.
set -euo pipefail
cd "$(dirname "$0")/../.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
env_sh="${XDST_CACHE:-$HOME/.cache/xdst}/env.sh"
[ -f "$env_sh" ] && source "$env_sh"
cargo build -q --release -p xdst --bin xdst -p xdst-tests --bin xdst-first200
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown); cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-); load: $(cut -d' ' -f1-3 /proc/loadavg)"
XDST_BIN="$target/release/xdst" exec "$target/release/xdst-first200" "$@"
