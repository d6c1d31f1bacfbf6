#!/usr/bin/env bash
# Issue 37, row 4 (results in docs/PERFORMANCE.md, "Reconnect storm"): 10,000 Delta streams,
# one connection each, each node with 100 EDS clusters (three endpoints each), a listener and
# a route configuration; then every connection dropped at once and opened again within one
# second. For each value of xdst's --max-new-streams-per-second, plaintext and then mTLS: the
# time until every stream holds its full configuration again, per stream p50/p99/max from its
# reconnect, and the streams refused or starved. In plaintext the minimal unordered server
# (tests/bench/unordered.rs) takes the same storm in the same invocation, after xdst's first
# rate. About 7 minutes on 2 cores.
#
#   tests/bench/storm.sh                         # rates 0 (no limit), 1000, 2000, 5000, 10000
#   tests/bench/storm.sh --admission 0,10000 --n 5000
#
# Any other argument goes to tests/bench/run.sh (see its --help).
set -euo pipefail
cd "$(dirname "$0")/../.."
admission=0,1000,2000,5000,10000
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --admission) admission=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) args+=("$1"); shift ;;
    esac
done
# Every Envoy reconnects on its own: no client-side cap on connections being established.
common=(--n 10000 --api delta --mode each --changes 0 --clusters 100 --storm --admission "$admission"
    --loadgen-args "--connect-concurrency 10000")
tests/bench/run.sh --compare unordered "${common[@]}" "${args[@]}"
tests/bench/run.sh --no-build --mtls "${common[@]}" "${args[@]}"
