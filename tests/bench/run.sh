#!/usr/bin/env bash
# The xdst benchmark (issue 2, "Must show" 5; results in docs/PERFORMANCE.md).
#
# Builds xdst and xdst-loadgen in release, and for each selected combination of stream
# count, API and connection mode starts a fresh `xdst serve` (RUST_LOG=warn) on free
# loopback ports over a copy of examples/quickstart/resources, runs the load generator
# against it (initial convergence, memory per idle stream, then --changes one-cluster
# changes), and stops the server. Prints every result and a summary table at the end.
#
#   tests/bench/run.sh                          # everything: N=1000,10000 x sotw,delta x mux,each
#   tests/bench/run.sh --n 1000 --api delta     # a subset
#   tests/bench/run.sh --n 10000 --api sotw --mode mux --change all
#   tests/bench/run.sh --n 10000 --change all --compare unordered   # xdst next to another server
#   tests/bench/run.sh --n 10000 --api delta --mode each --changes 0 --storm --admission 0,2000
#
# Options (lists are space- or comma-separated):
#   --n LIST          stream counts (default "1000 10000")
#   --api LIST        sotw, delta (default both)
#   --mode LIST       mux: streams multiplexed over --mux connections; each: one connection
#                     per stream (default both)
#   --mux C           connections in mux mode (default 10: see docs/PERFORMANCE.md)
#   --changes K       changes per run (default 5)
#   --change KIND     cluster (default), endpoint, or all (one field of each of the four types)
#   --repeat R        run each combination R times (default 1); with --compare, which server
#                     goes first alternates from one run to the next
#   --out FILE        also append the JSON result lines to FILE
#   --no-build        use the binaries already built
#   --loadgen-args S  extra arguments for xdst-loadgen (e.g. "--settle-ms 5000")
#   --compare WHAT    beside each xdst run, the same load against another ADS server, and
#                     ratio columns (xdst / other: time, memory, and server CPU a change, also
#                     over each one's load generator CPU) in the summary. WHAT is `unordered` (the
#                     minimal unordered tonic + envoy-types server, tests/bench/unordered.rs,
#                     started over its own copy of the resources) or a command that starts
#                     any ADS server: it is run with `{resources}` replaced by the directory
#                     to serve (the load generator edits its files for each change) and
#                     `{ready}` by a file to write `{"xds_addr":"HOST:PORT"}` into once it
#                     listens, e.g. --compare 'my-server --dir {resources} --ready {ready}'.
#                     `mtls` runs xdst again over mTLS (certificates made with openssl, every
#                     connection a TLS handshake with a client certificate): plaintext / mTLS.
#   --mtls            run xdst over mTLS (as --compare mtls does for its second run)
#   --admission LIST  xdst's --max-new-streams-per-second: one xdst run per value (default:
#                     xdst's default)
#   --clusters K      serve K - 1 more EDS clusters (each with three endpoints) beside the
#                     quickstart's one: a larger configuration per stream (default 1)
#   --storm           after the changes, a reconnect storm: every connection dropped at once
#                     and opened again within a second (xdst-loadgen --storm)
#
# Needs 2 x N file descriptors for N one-connection-per-stream streams (the server and the
# load generator each hold N): the script raises its soft limit to the hard one; if that is
# still too low, raise the hard limit (ulimit -Hn) first.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/xdst/target}

ns="1000 10000"
apis="sotw delta"
modes="mux each"
mux=10
changes=5
change=cluster
repeat=1
out=""
build=1
loadgen_args=""
compare=""
admissions=default
clusters=1
storm=""
xdst_mtls=0
while [ $# -gt 0 ]; do
    case "$1" in
        --n) ns=${2//,/ }; shift 2 ;;
        --api) apis=${2//,/ }; shift 2 ;;
        --mode) modes=${2//,/ }; shift 2 ;;
        --mux) mux=$2; shift 2 ;;
        --changes) changes=$2; shift 2 ;;
        --change) change=$2; shift 2 ;;
        --repeat) repeat=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --no-build) build=0; shift ;;
        --loadgen-args) loadgen_args=$2; shift 2 ;;
        --compare) compare=$2; shift 2 ;;
        --admission) admissions=${2//,/ }; shift 2 ;;
        --storm) storm=--storm; shift ;;
        --clusters) clusters=$2; shift 2 ;;
        --mtls) xdst_mtls=1; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

if [ "$build" = 1 ]; then
    (cd "$root" && cargo build --release -p xdst -p xdst-tests --bin xdst --bin xdst-loadgen \
        --bin xdst-bench-unordered)
fi
xdst=$CARGO_TARGET_DIR/release/xdst
loadgen=$CARGO_TARGET_DIR/release/xdst-loadgen
mtls=0
if [ "$compare" = mtls ]; then
    mtls=1
elif [ "$compare" = unordered ]; then
    compare="$CARGO_TARGET_DIR/release/xdst-bench-unordered --xds-addr 127.0.0.1:0 --resources {resources} --ready-file {ready}"
fi
[ -x "$xdst" ] && [ -x "$loadgen" ] || { echo "run.sh: $xdst or $loadgen missing (drop --no-build)" >&2; exit 1; }

ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

work=$(mktemp -d "${TMPDIR:-/tmp}/xdst-bench.XXXXXX")
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
if [ "$mtls" = 1 ] || [ "$xdst_mtls" = 1 ]; then
    # A CA, a server certificate for localhost and the load generator's client certificate;
    # identity rules that let it use every group.
    (
        cd "$work"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem \
            -days 1 -subj /CN=bench-ca -addext basicConstraints=critical,CA:TRUE 2>/dev/null
        for who in server:DNS:localhost client:URI:spiffe://bench/loadgen; do
            name=${who%%:*}
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$name.key" -out "$name.csr" \
                -subj "/CN=$name" 2>/dev/null
            printf 'basicConstraints=CA:FALSE\nsubjectAltName=%s\n' "${who#*:}" > "$name.ext"
            openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
                -extfile "$name.ext" -out "$name.pem" 2>/dev/null
        done
        printf "tls: {cert: server.pem, key: server.key, clientCa: ca.pem}\nidentities: [{identity: '*', groups: ['*']}]\n" \
            > mtls.yaml
    )
fi
results=$work/results.jsonl
: > "$results"

echo "== machine"
echo "date:     $(date -u +%Y-%m-%dT%H:%M:%SZ)"
if commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null); then
    git -C "$root" diff --quiet HEAD -- host || commit="$commit (host/ modified)"
else
    commit=unknown
fi
echo "commit:   $commit"
echo "nproc:    $(nproc)"
echo "cpu:      $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "memory:   $(free -h | awk '/^Mem:/ {print $2 " total, " $7 " available"}')"
echo "load:     $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)"
echo "fd limit: $(ulimit -n)"

# Whether the server of this run ($1: "xdst" or "compare") is xdst over mTLS.
over_mtls() {
    { [ "$1" = xdst ] && [ "$xdst_mtls" = 1 ]; } || { [ "$1" = compare ] && [ "$mtls" = 1 ]; }
}

start_server() { # $1: resources dir; $2: "xdst" or "compare"; $3: --max-new-streams-per-second
    local ready=$work/ready.json
    rm -f "$ready"
    if [ "$2" = xdst ] || [ "$mtls" = 1 ]; then
        local config=()
        over_mtls "$2" && config=(--config "$work/mtls.yaml")
        [ "$3" != default ] && config+=(--max-new-streams-per-second "$3")
        RUST_LOG=warn "$xdst" serve --xds-addr 127.0.0.1:0 --admin-addr 127.0.0.1:0 "${config[@]}" \
            --resources "$1" --ready-file "$ready" --debounce 10ms \
            --max-streams-per-connection 1048576 --max-connections-per-client 1000000 \
            --max-streams-per-client 1000000 --max-unread-bytes-per-client 1048576MiB &
    else
        local cmd=${compare//\{resources\}/$1}
        cmd=${cmd//\{ready\}/$ready}
        # shellcheck disable=SC2086 # the command is a list of words
        RUST_LOG=warn $cmd &
    fi
    server_pid=$!
    for _ in $(seq 200); do
        [ -s "$ready" ] && break
        kill -0 "$server_pid" 2>/dev/null || { echo "run.sh: the $2 server exited before it was ready" >&2; exit 1; }
        sleep 0.05
    done
    [ -s "$ready" ] || { echo "run.sh: the $2 server not ready after 10 s" >&2; exit 1; }
    xds_addr=$(sed -n 's/.*"xds_addr":"\([^"]*\)".*/\1/p' "$ready")
    admin_addr=$(sed -n 's/.*"admin_addr":"\([^"]*\)".*/\1/p' "$ready")
}

stop_server() {
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
}

for n in $ns; do
    for api in $apis; do
        for mode in $modes; do
            case "$mode" in
                mux) conns=$mux ;;
                each) conns=$n ;;
                *) echo "run.sh: --mode is mux or each, not $mode" >&2; exit 2 ;;
            esac
            for r in $(seq "$repeat"); do
                # Which server goes first alternates with each run: on these machines the first of
                # two back-to-back runs is often the slower one, for the load generator too.
                order="xdst ${compare:+compare}"
                if [ -n "$compare" ] && [ $((r % 2)) = 0 ]; then order="compare xdst"; fi
                for adm in $admissions; do
                for server in $order; do
                    # The other server has no admission setting: it runs once, beside the first.
                    if [ "$server" = compare ] && [ "$adm" != "${admissions%% *}" ]; then continue; fi
                    res=$work/resources-$n-$api-$mode-$r-$adm-$server
                    mkdir -p "$res"
                    cp -r "$root"/examples/quickstart/resources/. "$res"/
                    for k in $(seq 2 "$clusters"); do
                        printf '%s\n' '---' '"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster' \
                            "name: extra-$k" 'type: EDS' 'connect_timeout: 1s' \
                            'eds_cluster_config: {eds_config: {ads: {}, resource_api_version: V3}}' '---' \
                            '"@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment' \
                            "cluster_name: extra-$k" 'endpoints:' '- lb_endpoints:'
                        for e in 1 2 3; do
                            echo "  - endpoint: {address: {socket_address: {address: 10.0.$((k % 250)).$e, port_value: 8080}}}"
                        done
                    done > "$res/extra.yaml"
                    echo
                    echo "== server=$server N=$n api=$api mode=$mode connections=$conns clusters=$clusters change=$change admission=$adm mtls=$(over_mtls "$server" && echo yes || echo no) run=$r (load $(cut -d' ' -f1 /proc/loadavg))"
                    start_server "$res" "$server" "$adm"
                    tls=()
                    admin=()
                    # xdst's operator reads (/changes, /status) are timed with its streams open.
                    # (The load generator reads them in plaintext.)
                    if [ "$server" = xdst ] && [ -n "$admin_addr" ] && ! over_mtls xdst; then admin=(--admin "$admin_addr"); fi
                    if over_mtls "$server"; then
                        tls=(--tls-ca "$work/ca.pem" --tls-cert "$work/client.pem" --tls-key "$work/client.key")
                    fi
                    # shellcheck disable=SC2086 # loadgen_args is a list of words
                    "$loadgen" --addr "$xds_addr" --n "$n" --api "$api" --connections "$conns" "${tls[@]}" "${admin[@]}" \
                        --server-pid "$server_pid" --resources "$res" --changes "$changes" \
                        --change "$change" --json $storm $loadgen_args | tee "$work/out.txt"
                    tls_mode=$(over_mtls "$server" && echo mtls || echo plaintext)
                    grep '^RESULT ' "$work/out.txt" \
                        | sed "s/^RESULT {/{\"server\":\"$server\",\"mode\":\"$mode\",\"run\":$r,\"admission\":\"$adm\",\"tls\":\"$tls_mode\",/" >> "$results" || true
                    stop_server
                    sleep 1 # let closed connections drain before the next server starts
                done
                done
            done
        done
    done
done

if [ -n "$out" ]; then cat "$results" >> "$out"; fi

echo
echo "== summary (ms; KB = 1000 bytes)"
if command -v python3 > /dev/null; then
    python3 - "$results" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"{'server':<7} {'N':>6} {'api':<5} {'mode':<4} {'conns':>5} | {'initial all':>11} {'p50':>6} {'p99':>6} | "
      f"{'KB/stream':>9} | change p50 / p99 / all, each change")
for r in rows:
    i = r["initial"]["latency"]
    ch = "  ".join(f"{c['latency']['p50_ms']:.0f}/{c['latency']['p99_ms']:.0f}/{c['latency']['max_ms']:.0f}"
                   + ("" if c["converged"] == r["n"] else f" ({c['converged']} of {r['n']})")
                   for c in r["changes"])
    kb = r["bytes_per_idle_stream"]
    kb = f"{kb / 1000:.1f}" if kb is not None else "-"
    conv = "" if r["initial"]["converged"] == r["n"] else f" ({r['initial']['converged']} of {r['n']})"
    print(f"{r.get('server', 'xdst'):<7} {r['n']:>6} {r['api']:<5} {r['mode']:<4} {r['connections']:>5} | "
          f"{i['max_ms']:>11.0f} {i['p50_ms']:>6.0f} {i['p99_ms']:>6.0f} | {kb:>9} | {ch}{conv}")

storms = [r for r in rows if r.get("storm")]
if storms:
    print()
    print("== reconnect storm: every connection dropped, reopened within a second (ms)")
    print(f"{'server':<7} {'N':>6} {'api':<5} {'tls':<9} {'admission':>9} | {'all again':>9} {'p50':>6} {'p99':>6} {'max':>6} | "
          f"{'failed':>6} {'starved':>7} | server CPU ms")
    for r in storms:
        s = r["storm"]
        p = s["per_stream"]
        print(f"{r.get('server', 'xdst'):<7} {r['n']:>6} {r['api']:<5} {r.get('tls', '-'):<9} {r.get('admission', '-'):>9} | "
              f"{s['all_ms']:>9.0f} {p['p50_ms']:>6.0f} {p['p99_ms']:>6.0f} {p['max_ms']:>6.0f} | "
              f"{s['failed']:>6} {s['starved']:>7} | {s['server_cpu_ms']:.0f}")

# xdst next to the other server: medians over the changes of the time until every stream
# converged ("all"), the initial convergence, and KB per idle stream.
def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else None
def key(r):
    return (r["n"], r["api"], r["mode"], r.get("run", 1), r.get("admission"))
others = {key(r): r for r in rows if r.get("server") == "compare"}
pairs = [(r, others[key(r)]) for r in rows if r.get("server", "xdst") == "xdst" and key(r) in others]
if pairs:
    print()
    print("== xdst / other server (same load, same run; ratio < 1 means xdst is faster or smaller)")
    print("   CPU: each server's mean CPU a change, ms, and that mean over its load generator's: between")
    print("   two builds of one server the second ratio corrects for the machine slowing down between")
    print("   the runs (the load generator's CPU moves with it); another server's responses may cost")
    print("   the load generator more or less, and then only the first compares the servers")
    print(f"{'N':>6} {'api':<5} {'mode':<4} {'run':>3} | {'change all, median ms':>24} | {'initial all ms':>20} | "
          f"{'KB/idle stream':>18} | {'CPU a change':>22} | {'over loadgen':>18}")
    def cell(a, b, fmt):
        if a is None or b is None:
            return "-"
        return f"{fmt(a)} / {fmt(b)} = {a / b:.2f}" if b else f"{fmt(a)} / {fmt(b)}"
    for x, o in pairs:
        ch = cell(median([c["latency"]["max_ms"] for c in x["changes"]]),
                  median([c["latency"]["max_ms"] for c in o["changes"]]), lambda v: f"{v:.0f}")
        ini = cell(x["initial"]["latency"]["max_ms"], o["initial"]["latency"]["max_ms"], lambda v: f"{v:.0f}")
        kb = cell(x["bytes_per_idle_stream"] and x["bytes_per_idle_stream"] / 1000,
                  o["bytes_per_idle_stream"] and o["bytes_per_idle_stream"] / 1000, lambda v: f"{v:.1f}")
        def cpu(r):
            cs = [c for c in r["changes"] if c.get("server_cpu_ms") is not None]
            server = sum(c["server_cpu_ms"] for c in cs) / len(cs) if cs else None
            loadgen = sum(c["loadgen_cpu_ms"] for c in cs) / len(cs) if cs else None
            return server, (server / loadgen if server is not None and loadgen else None)
        (xs, xn), (os_, on) = cpu(x), cpu(o)
        cp = cell(xs, os_, lambda v: f"{v:.0f}")
        norm = cell(xn, on, lambda v: f"{v:.2f}")
        print(f"{x['n']:>6} {x['api']:<5} {x['mode']:<4} {x.get('run', 1):>3} | {ch:>24} | {ini:>20} | {kb:>18} | "
              f"{cp:>22} | {norm:>18}")
EOF
else
    cat "$results"
fi
