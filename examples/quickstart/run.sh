#!/usr/bin/env bash
# The xdst quickstart: one command that builds xdst, serves the example resources in
# examples/quickstart/resources, starts a real Envoy pointed at it (the bootstrap beside
# this script) and a local upstream, sends traffic through Envoy, then edits a resource
# live and shows Envoy picking it up, with no restart.
#
#   examples/quickstart/run.sh          run the demo, then keep everything up until Ctrl-C
#   examples/quickstart/run.sh --once   run the demo and exit (what the test command does)
#
# Ports (all on 127.0.0.1): xdst xDS 18000, xdst admin 19000, Envoy listener 10000,
# Envoy admin 9901, upstreams 8080 and 8081.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
once=false
[[ "${1:-}" == "--once" ]] && once=true

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/xdst/target}"

say "installing Envoy (once; cached under ${XDST_CACHE:-$HOME/.cache/xdst})"
tests/setup.sh >/dev/null
# shellcheck disable=SC1091
source "${XDST_CACHE:-$HOME/.cache/xdst}/env.sh"

say "building xdst"
cargo build -q -p xdst --bin xdst
xdst="$CARGO_TARGET_DIR/debug/xdst"

work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

# A copy of the example resources, so the live edit below does not touch the repo.
cp -r examples/quickstart/resources "$work/resources"

upstream() { # name port: an HTTP server that answers with its name
  mkdir -p "$work/$1" && echo "hello from $1" > "$work/$1/index.html"
  "$XDST_PYTHON" -m http.server "$2" --bind 127.0.0.1 --directory "$work/$1" >/dev/null 2>&1 &
  pids+=($!)
}
upstream backend-a 8080
upstream backend-b 8081

say "starting xdst serve --resources $work/resources"
RUST_LOG="${RUST_LOG:-info}" "$xdst" serve --resources "$work/resources" 2> >(sed 's/^/  [xdst] /' >&2) &
pids+=($!)
for _ in $(seq 100); do curl -sf localhost:19000/healthz >/dev/null && break; sleep 0.1; done

say "starting Envoy with examples/quickstart/envoy.yaml"
"$ENVOY_BIN" -c examples/quickstart/envoy.yaml --disable-hot-restart --concurrency 1 -l warning \
  --base-id 7 >"$work/envoy.log" 2>&1 &
pids+=($!)

wait_for() { # description, command: poll for up to 20 s
  local what="$1"; shift
  for _ in $(seq 200); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "timed out waiting for $what" >&2
  tail -20 "$work/envoy.log" >&2
  exit 1
}
stat_value() { curl -s "localhost:9901/stats?filter=^$1\$" | sed 's/^[^:]*: //'; }

wait_for "Envoy to route traffic" curl -sf localhost:10000/
say "curl localhost:10000/ (through Envoy, config from xdst)"
curl -s localhost:10000/
echo "Envoy's accepted versions (content hashes, the same on every xdst replica):"
curl -s "localhost:9901/stats?filter=version_text" | sed 's/^/  /'

say "editing the resources directory: backend's endpoint 8080 -> 8081"
before="$(stat_value cluster.backend.version_text)"
sed -i 's/port_value: 8080/port_value: 8081/' "$work/resources/backend.yaml"
wait_for "the new endpoints to reach Envoy" sh -c "curl -s localhost:10000/ | grep -q backend-b"
curl -s localhost:10000/
echo "  cluster.backend.version_text: $before -> $(stat_value cluster.backend.version_text)"

say "a broken edit is refused by xdst and changes nothing"
sed -i 's/connect_timeout: 1s/connect_timeout: soon/' "$work/resources/backend.yaml"
wait_for "xdst to report the error" sh -c "curl -s localhost:19000/debug/resources | grep -q 'field connect_timeout'"
curl -s localhost:19000/debug/resources | "$XDST_PYTHON" -c 'import json,sys; print("  xdst says:", json.load(sys.stdin)["source"]["last_error"])'
curl -s localhost:10000/

say "connected nodes (xdst admin: localhost:19000/debug/nodes)"
curl -s localhost:19000/debug/nodes | "$XDST_PYTHON" -c '
import json, sys
for n in json.load(sys.stdin):
    print("  node %s (%s), group %r" % (n["id"], n["user_agent"], n["group"]))
    for s in n["streams"]:
        for t in s["types"]:
            kind = t["type_url"].rsplit(".", 1)[-1]
            print("    %s %-22s sent %s  acked %s" % (s["api"], kind, t["version_sent"], t["version_acked"]))
'

if $once; then
  say "quickstart ok"
  exit 0
fi
say "all running: try curl localhost:10000/, edit $work/resources/*.yaml, or open localhost:19000/. Ctrl-C stops."
wait
