# Shared by the quickstarts (sourced, not run): the --once flag, logging, the tools
# (tests/setup.sh installs them once), the xdst build, a work directory cleaned up on exit with
# the reference plugin in it, local upstreams and polling.
#
# Sets: root, once, xdst, work, pids (processes to stop on exit).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
once=false
[[ "${1:-}" == "--once" ]] && once=true

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/xdst/target}"

say "installing the tools it runs (once; cached under ${XDST_CACHE:-$HOME/.cache/xdst})"
tests/setup.sh >/dev/null
# shellcheck disable=SC1091
source "${XDST_CACHE:-$HOME/.cache/xdst}/env.sh"

say "building xdst and the reference plugin (wasm32)"
cargo build -q -p xdst --bin xdst
cargo build -q --release --target wasm32-unknown-unknown -p xdst-plugin-reference
xdst="$CARGO_TARGET_DIR/debug/xdst"

work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
mkdir "$work/plugins"
cp "$CARGO_TARGET_DIR/wasm32-unknown-unknown/release/xdst_plugin_reference.wasm" "$work/plugins/reference.wasm"

upstream() { # name port: an HTTP server that answers with its name
  mkdir -p "$work/$1" && echo "hello from $1" > "$work/$1/index.html"
  "$XDST_PYTHON" -m http.server "$2" --bind 127.0.0.1 --directory "$work/$1" >/dev/null 2>&1 &
  pids+=($!)
}

wait_for() { # description, command: poll for up to 30 s; on timeout show the logs in $work
  local what="$1"; shift
  for _ in $(seq 300); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "timed out waiting for $what" >&2
  tail -n 20 "$work"/*.log >&2 || true
  exit 1
}
