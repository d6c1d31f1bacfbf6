#!/usr/bin/env bash
# TLS passthrough, TCP and UDP through a real Envoy: one Gateway (intent/gateway.yaml) with a
# TLS passthrough listener, a TCP listener and a UDP listener, a TLSRoute, a TCPRoute and a
# UDPRoute, translated by the gateway-api plugin and served by xdst to Envoy. The backends are
# local: an `openssl s_server` that ends TLS with its own certificate, and a TCP and a UDP
# echo (echo.py beside this script). It connects through Envoy to each, shows that the TLS
# backend's certificate is what the client sees (Envoy never ends that TLS), and prints the
# routes' and the Gateway's status as xdst serves it.
#
#   examples/tls-tcp-udp/run.sh          run the demo, then keep everything up until Ctrl-C
#   examples/tls-tcp-udp/run.sh --once   run the demo and exit (what the test command does)
#
# Ports (all on 127.0.0.1): xdst xDS 18003, admin 19003; Envoy admin 9903 and the Gateway's
# listeners 10443 (TLS), 10900 (TCP) and 10953 (UDP); backends 8443 (TLS), 9000 (TCP) and
# 9053 (UDP).
# shellcheck source=examples/lib.sh
source "$(dirname "$0")/../lib.sh"
here=examples/tls-tcp-udp
echo_py() { "$XDST_PYTHON" "$here/echo.py" "$@"; }

say "building the gateway-api plugin (wasm32)"
cargo build -q --release --target wasm32-unknown-unknown -p xdst-plugin-gateway-api
rm -f "$work/plugins/reference.wasm"
cp "$CARGO_TARGET_DIR/wasm32-unknown-unknown/release/xdst_plugin_gateway_api.wasm" "$work/plugins/gateway-api.wasm"
cp "$here/gateway-api.yaml" "$work/plugins/gateway-api.yaml"

say "starting the backends: a TLS server with its own certificate (secure.example.com), a TCP and a UDP echo"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
  -keyout "$work/backend.key" -out "$work/backend.pem" -subj "/CN=secure.example.com (the backend's own)" \
  -addext "subjectAltName=DNS:secure.example.com" 2>/dev/null
openssl s_server -quiet -accept 127.0.0.1:8443 -cert "$work/backend.pem" -key "$work/backend.key" -www \
  >"$work/tls-backend.log" 2>&1 &
pids+=($!)
# Started directly, not through echo_py: the pid kept on exit must be Python's own, not a
# subshell's that leaves Python running.
"$XDST_PYTHON" "$here/echo.py" serve-tcp 9000 tcp-echo >"$work/tcp-echo.log" 2>&1 &
pids+=($!)
"$XDST_PYTHON" "$here/echo.py" serve-udp 9053 udp-echo >"$work/udp-echo.log" 2>&1 &
pids+=($!)

say "starting xdst serve --intent $here/intent --plugins (gateway-api)"
RUST_LOG="${RUST_LOG:-info}" "$xdst" serve --intent "$here/intent" --plugins "$work/plugins" \
  --plugin-cache "$work/cache" --xds-addr 127.0.0.1:18003 --admin-addr 127.0.0.1:19003 \
  2> >(sed 's/^/  [xdst] /' >&2) &
pids+=($!)
wait_for "xdst" curl -sf localhost:19003/healthz

say "starting Envoy with $here/envoy.yaml"
"$ENVOY_BIN" -c "$here/envoy.yaml" --disable-hot-restart --concurrency 1 -l warning \
  --base-id 9 >"$work/envoy.log" 2>&1 &
pids+=($!)

say "TCP through the Gateway's :10900 (TCPRoute demo/echo)"
wait_for "Envoy to proxy TCP" echo_py tcp 127.0.0.1 10900 probe
echo "  $(echo_py tcp 127.0.0.1 10900 'hello over TCP')"

say "UDP through the Gateway's :10953 (UDPRoute demo/echo)"
wait_for "Envoy to proxy UDP" echo_py udp 127.0.0.1 10953 probe
echo "  $(echo_py udp 127.0.0.1 10953 'hello over UDP')"

say "TLS passthrough through the Gateway's :10443 (TLSRoute demo/secure, server name secure.example.com)"
wait_for "Envoy to pass TLS through" curl -sf --cacert "$work/backend.pem" \
  --resolve secure.example.com:10443:127.0.0.1 https://secure.example.com:10443/
subject=$(openssl s_client -connect 127.0.0.1:10443 -servername secure.example.com </dev/null 2>/dev/null \
  | openssl x509 -noout -subject)
echo "  the certificate the client sees: $subject"
echo "  (Envoy holds no certificate for it: the backend ended TLS)"
echo "  HTTPS through it, trusting only the backend's certificate: HTTP $(curl -s -o /dev/null -w '%{http_code}' \
  --cacert "$work/backend.pem" --resolve secure.example.com:10443:127.0.0.1 https://secure.example.com:10443/)"
printf '  another server name (other.example.com): '
if openssl s_client -connect 127.0.0.1:10443 -servername other.example.com </dev/null >/dev/null 2>&1; then
  echo "answered, but no route has that name" >&2
  exit 1
fi
echo "refused: no route serves it"

say "status, as xdst serves it (GET /intent/<kind>/demo/<name> on the admin port)"
for doc in TLSRoute/demo/secure TCPRoute/demo/echo UDPRoute/demo/echo; do
  curl -s "localhost:19003/intent/$doc" | "$XDST_PYTHON" -c '
import json, sys
doc = sys.argv[1]
for p in json.load(sys.stdin)["status"]["parents"]:
    print("  %s -> %s/%s: %s" % (doc, p["parentRef"]["name"], p["parentRef"].get("sectionName", ""),
          ", ".join("%s %s" % (c["type"], c["status"]) for c in p["conditions"])))' "$doc"
done
curl -s localhost:19003/intent/Gateway/demo/edge | "$XDST_PYTHON" -c '
import json, sys
s = json.load(sys.stdin)["status"]
for l in s["listeners"]:
    kinds = ",".join(k["kind"] for k in l["supportedKinds"])
    ok = ", ".join("%s %s" % (c["type"], c["status"]) for c in l["conditions"])
    print("  Gateway demo/edge listener %s (%s): %d attached; %s" % (l["name"], kinds, l["attachedRoutes"], ok))'

if $once; then
  say "TLS, TCP and UDP example ok"
  exit 0
fi
say "all running: try $here/echo.py tcp 127.0.0.1 10900 hi, or open localhost:19003/intent/Gateway/demo/edge. Ctrl-C stops."
wait
