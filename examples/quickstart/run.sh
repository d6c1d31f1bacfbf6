#!/usr/bin/env bash
# The xdst quickstart: one command that builds xdst and the reference plugin (wasm), serves
# the example intent in examples/quickstart/intent through the plugin (and the same backends
# described with the Kubernetes Gateway API, through the gateway-api plugin beside it), starts a real Envoy
# pointed at xdst (the bootstrap beside this script) and two local upstreams, sends traffic
# through Envoy, edits the intent live and shows Envoy picking it up with no restart, then
# makes a broken edit that xdst holds out while Envoy keeps serving.
#
# (examples/quickstart/resources holds the same setup as plain Envoy resources, for
# `xdst serve --resources`.)
#
#   examples/quickstart/run.sh          run the demo, then keep everything up until Ctrl-C
#   examples/quickstart/run.sh --once   run the demo and exit (what the test command does)
#
# Ports (all on 127.0.0.1): xdst xDS 18000, xdst admin 19000, Envoy listeners 10000 (reference
# kinds) and 10001 (Gateway API), Envoy admin 9901, upstreams 8080 and 8081.
# shellcheck source=examples/lib.sh
source "$(dirname "$0")/../lib.sh"

# A copy of the example intent, so the live edit below does not touch the repo: the reference
# kinds, and beside them the same backends as Gateway API objects.
cp -r examples/quickstart/intent "$work/intent"
cp examples/quickstart/gateway-api/gateway-api.yaml "$work/intent/"

say "building the gateway-api plugin (wasm32), which translates intent/gateway-api.yaml"
cargo build -q --release --target wasm32-unknown-unknown -p xdst-plugin-gateway-api
cp "$CARGO_TARGET_DIR/wasm32-unknown-unknown/release/xdst_plugin_gateway_api.wasm" "$work/plugins/gateway-api.wasm"
cp examples/quickstart/gateway-api-plugin.yaml "$work/plugins/gateway-api.yaml"

upstream backend-a 8080
upstream backend-b 8081

say "what the plugin makes of the intent: xdst translate (first lines)"
"$xdst" translate --intent "$work/intent" --plugins "$work/plugins" --plugin-cache "$work/cache" 2>&1 | head -12 | sed 's/^/  /'

say "starting xdst serve --intent $work/intent --plugins $work/plugins"
RUST_LOG="${RUST_LOG:-info}" "$xdst" serve --intent "$work/intent" --plugins "$work/plugins" \
  --plugin-cache "$work/cache" 2> >(sed 's/^/  [xdst] /' >&2) &
pids+=($!)
for _ in $(seq 100); do curl -sf localhost:19000/healthz >/dev/null && break; sleep 0.1; done

say "starting Envoy with examples/quickstart/envoy.yaml"
"$ENVOY_BIN" -c examples/quickstart/envoy.yaml --disable-hot-restart --concurrency 1 -l warning \
  --base-id 7 >"$work/envoy.log" 2>&1 &
pids+=($!)

stat_value() { curl -s "localhost:9901/stats?filter=^$1\$" | sed 's/^[^:]*: //'; }

wait_for "Envoy to route traffic" curl -sf localhost:10000/
say "20 requests through Envoy (90/10 split between backend-a and backend-b), then one with x-canary: yes"
for _ in $(seq 20); do curl -s localhost:10000/; done | sort | uniq -c | sed 's/^/  /'
curl -s -H 'x-canary: yes' localhost:10000/ | sed 's/^/  x-canary: yes -> /'
echo "Envoy's accepted versions (content hashes, the same on every xdst replica):"
curl -s "localhost:9901/stats?filter=version_text" | sed 's/^/  /'

say "the Gateway API side (intent/gateway-api.yaml): the same backends through its Gateway on :10001"
wait_for "Envoy to route the Gateway's traffic" curl -sf localhost:10001/
echo "  /          -> $(curl -s localhost:10001/)"
echo "  /b         -> $(curl -s localhost:10001/b)"
echo "  x-canary   -> $(curl -s -H 'x-canary: yes' localhost:10001/)"
echo "  /missing   -> HTTP $(curl -s -o /dev/null -w '%{http_code}' localhost:10001/missing) (its backend does not exist)"
echo "  the route's status, as xdst serves it (GET /intent/HTTPRoute/demo/web):"
curl -s localhost:19000/intent/HTTPRoute/demo/web | "$XDST_PYTHON" -c '
import json, sys
for p in json.load(sys.stdin)["status"]["parents"]:
    for c in p["conditions"]:
        print("    %s %s (%s) %s" % (c["type"], c["status"], c["reason"], c["message"]))
'

say "editing the intent: backend-a moves to port 8081"
before="$(stat_value cluster.backend-a.version_text)"
sed -i '0,/port: 8080/s//port: 8081/' "$work/intent/web.yaml"
wait_for "the new endpoints to reach Envoy" sh -c "test \"\$(for i in \$(seq 10); do curl -s localhost:10000/; done | sort -u)\" = 'hello from backend-b'"
echo "  every request now answers: $(curl -s localhost:10000/)"
echo "  cluster.backend-a.version_text: $before -> $(stat_value cluster.backend-a.version_text)"

say "a broken edit is held out by xdst: the documents keep their last good version"
sed -i 's/connectTimeout: 1s/connectTimeout: soon/' "$work/intent/web.yaml"
wait_for "xdst to report the error" sh -c "curl -s localhost:19000/debug/plugins | grep -q 'spec.connectTimeout'"
curl -s localhost:19000/debug/plugins | "$XDST_PYTHON" -c '
import json, sys
for h in json.load(sys.stdin)["held"]:
    print("  held: %s (serving its %s version): %s" % (h["held"], h["serving"], h["error"]))'
curl -s localhost:19000/readyz | sed 's/^/  \/readyz: /'; echo
curl -s localhost:10000/ | sed 's/^/  still serving: /'

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
say "all running: try curl localhost:10000/, edit $work/intent/web.yaml, or open localhost:19000/debug/plugins. Ctrl-C stops."
wait
