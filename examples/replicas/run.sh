#!/usr/bin/env bash
# The replicas quickstart: intent in etcd, served by two xdst replicas, and a failover.
#
# It starts a 3-member etcd on loopback, imports the quickstart's intent into it
# (`xdst store import`), starts two `xdst serve --store` replicas and a real Envoy whose
# xds_cluster lists both (examples/replicas/envoy.yaml, Delta ADS), sends traffic through
# Envoy, kills (SIGKILL) the replica Envoy's stream is on, and shows Envoy moving to the other
# replica with no failed request and no version change. Then it writes through the surviving
# replica's intent API and shows Envoy picking the change up.
#
#   examples/replicas/run.sh          run the demo, then keep everything up until Ctrl-C
#   examples/replicas/run.sh --once   run the demo and exit
#
# Ports (all on 127.0.0.1): etcd 2379/2380, 12379/12380, 22379/22380; replica A xDS 18001,
# admin 19001; replica B xDS 18002, admin 19002; Envoy listener 10000, admin 9902; upstreams
# 8080 and 8081.
# shellcheck source=examples/lib.sh
source "$(dirname "$0")/../lib.sh"
echo "replicas-demo-token" > "$work/token"

say "starting a 3-member etcd cluster"
cluster="m0=http://127.0.0.1:2380,m1=http://127.0.0.1:12380,m2=http://127.0.0.1:22380"
for i in 0 1 2; do
  client=$((2379 + i * 10000)); peer=$((2380 + i * 10000))
  /usr/bin/etcd --name "m$i" --data-dir "$work/etcd-m$i" --log-level warn --logger zap \
    --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "$cluster" --initial-cluster-token xdst-replicas-demo \
    --heartbeat-interval 50 --election-timeout 500 >"$work/etcd-m$i.log" 2>&1 &
  pids+=($!)
done
store="etcd://127.0.0.1:2379,127.0.0.1:12379,127.0.0.1:22379/xdst-replicas"
wait_for "etcd" curl -sf -X POST -d '{"key":"cHJvYmU="}' http://127.0.0.1:2379/v3/kv/range

say "xdst store import examples/quickstart/intent --store $store"
"$xdst" store import examples/quickstart/intent --store "$store" 2>/dev/null | sed 's/^/  /'

upstream backend-a 8080
upstream backend-b 8081

declare -A replica_pid
for r in a:1 b:2; do
  name=${r%%:*}; n=${r#*:}
  say "starting replica $name: xdst serve --store ... --replica-id replica-$name (xDS 1800$n, admin 1900$n)"
  RUST_LOG="${RUST_LOG:-warn}" "$xdst" serve --store "$store" --plugins "$work/plugins" \
    --plugin-cache "$work/cache" --admin-token-file "$work/token" --replica-id "replica-$name" \
    --xds-addr "127.0.0.1:1800$n" --admin-addr "127.0.0.1:1900$n" 2> >(sed "s/^/  [replica-$name] /" >&2) &
  replica_pid[$name]=$!
  pids+=($!)
  wait_for "replica $name" curl -sf "localhost:1900$n/readyz"
done

say "starting Envoy with examples/replicas/envoy.yaml (its xds_cluster lists both replicas)"
"$ENVOY_BIN" -c examples/replicas/envoy.yaml --disable-hot-restart --concurrency 1 -l warning \
  --base-id 8 >"$work/envoy.log" 2>&1 &
pids+=($!)
wait_for "Envoy to route traffic" curl -sf localhost:10000/
stat_value() { curl -s "localhost:9902/stats?filter=^$1\$" | sed 's/^[^:]*: //'; }

fleet() { # the fleet view, as any replica shows it: replica -> nodes
  curl -s "localhost:$1/debug/nodes?fleet=true" | "$XDST_PYTHON" -c '
import json, sys
for r in json.load(sys.stdin)["replicas"]:
    print("  %s (xDS %s, revision %s): %s" % (r["replica"], r["xds_addr"], r["revision"],
          ", ".join(n["id"] for n in r["nodes"]) or "no nodes"))'
}
on_replica() { # which replica Envoy's stream is on
  for n in a:19001 b:19002; do
    curl -s "localhost:${n#*:}/debug/nodes" | grep -q '"replicas-envoy"' && { echo "${n%%:*}"; return; }
  done
}
wait_for "the fleet view to show Envoy" sh -c "curl -s 'localhost:19001/debug/nodes?fleet=true' | grep -q replicas-envoy"
say "the fleet, as replica a's /debug/nodes?fleet=true shows it"
fleet 19001

on=$(on_replica)
other=$([ "$on" = a ] && echo b || echo a)
other_admin=$([ "$other" = a ] && echo 19001 || echo 19002)
versions_before=$(curl -s "localhost:9902/stats?filter=version_text" | sort)
updates_before=$(curl -s "localhost:9902/stats?filter=update_success" | sort)

say "traffic through Envoy (20 requests/s); SIGKILL replica $on, which Envoy's stream is on"
: > "$work/traffic"
( while :; do curl -s -o /dev/null -w '%{http_code}\n' --max-time 2 localhost:10000/ >>"$work/traffic" || echo 000 >>"$work/traffic"; sleep 0.05; done ) &
traffic=$!
pids+=($traffic)
sleep 2
{ kill -9 "${replica_pid[$on]}"; wait "${replica_pid[$on]}"; } 2>/dev/null || true
wait_for "Envoy to reconnect to replica $other" sh -c "curl -s localhost:$other_admin/debug/nodes | grep -q '\"replicas-envoy\"'"
sleep 3
kill "$traffic" 2>/dev/null || true
total=$(wc -l < "$work/traffic"); failed=$(grep -vc '^200$' "$work/traffic" || true)
echo "  Envoy is on replica $other now; $total requests during the failover, $failed failed"
if [ "$versions_before" = "$(curl -s "localhost:9902/stats?filter=version_text" | sort)" ] \
  && [ "$updates_before" = "$(curl -s "localhost:9902/stats?filter=update_success" | sort)" ]; then
  echo "  every version_text and update_success counter is unchanged: replica $other sent nothing new"
else
  echo "  Envoy's versions or update counters changed across the failover" >&2
  exit 1
fi
[ "$failed" = 0 ] || { echo "requests failed during the failover" >&2; exit 1; }

say "an intent write through replica $other's API: backend-a moves to port 8081"
curl -s -X PUT -H "Authorization: Bearer replicas-demo-token" --data-binary @- \
  "localhost:$other_admin/intent/Service/backend-a" <<'EOF' | sed 's/^/  /'
kind: Service
metadata: {name: backend-a}
spec:
  connectTimeout: 1s
  endpoints:
  - {address: 127.0.0.1, port: 8081}
EOF
echo
wait_for "the change to reach Envoy" sh -c "test \"\$(for i in \$(seq 10); do curl -s localhost:10000/; done | sort -u)\" = 'hello from backend-b'"
echo "  every request now answers: $(curl -s localhost:10000/)"
say "the fleet after the failover (replica $on dropped out when its lease expired, or will within 10 s)"
fleet "$other_admin"

if $once; then
  say "replicas quickstart ok"
  exit 0
fi
say "all running: try curl localhost:10000/, PUT intent through localhost:$other_admin, or start replica $on again. Ctrl-C stops."
wait
