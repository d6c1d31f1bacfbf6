#!/usr/bin/env bash
# Builds an xdst plugin written in JavaScript into a WebAssembly component.
#
#   guest-sdk/js/build.sh SRC_DIR OUT_WASM
#
# SRC_DIR holds the plugin: `src/index.js` (or `index.js`), an ES module exporting the WIT
# world's `describe` and `translate`, and the modules it imports by relative path. The
# component embeds QuickJS (componentize-qjs) with the plugin's code already loaded; it
# imports the host's `log` and WASI (which xdst links empty: no files, env, args or network;
# stdout and stderr go to xdst's log; XDST_JS_STUB_WASI=1 leaves WASI out). See
# guest-sdk/js/README.md.
#
# Installs what it needs when missing: node and npm (apt), then componentize-qjs into
# ${XDST_TOOLCHAINS:-$HOME/.cache/xdst/toolchains}/js. The WIT contract is read from $XDST_WIT
# (a directory holding plugin.wit), by default proto/wit/xdst-plugin-0.1.0 of this repository.
set -euo pipefail

QJS_VERSION=0.4.5 # componentize-qjs on npm, and its prebuilt native binding
NODE_MIN_MAJOR=18

say() { echo "==> $*" >&2; }
die() { echo "error: $*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: $0 SRC_DIR OUT_WASM"
[ -d "$1" ] || die "no source directory $1"
src=$(cd "$1" && pwd)
out=$2
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
wit=${XDST_WIT:-$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)/../../proto/wit/xdst-plugin-0.1.0}
[ -f "$wit/plugin.wit" ] || die "no plugin.wit in $wit: set XDST_WIT to the directory of the xdst plugin WIT"
toolchain=${XDST_TOOLCHAINS:-$HOME/.cache/xdst/toolchains}/js

entry=
for candidate in src/index.js index.js; do
  if [ -f "$src/$candidate" ]; then entry=$src/$candidate; break; fi
done
[ -n "$entry" ] || die "no src/index.js (or index.js) in $src: the plugin's entry module"

# node and npm: Debian's packages are enough (componentize-qjs needs node >= 18).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  command -v apt-get >/dev/null || die "node and npm are missing and there is no apt-get to install them"
  say "installing nodejs and npm with apt-get (about a minute)"
  if [ "$(id -u)" -eq 0 ]; then sudo=; else sudo=sudo; fi
  $sudo apt-get install -y nodejs npm >&2 ||
    { $sudo apt-get update >&2 && $sudo apt-get install -y nodejs npm >&2; } ||
    die "could not install nodejs and npm"
fi
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge "$NODE_MIN_MAJOR" ] || die "node $(node --version) is too old: componentize-qjs needs node >= $NODE_MIN_MAJOR"

# componentize-qjs, pinned, in the shared toolchain directory (one install at a time).
mkdir -p "$toolchain"
exec 9>"$toolchain/.lock"
command -v flock >/dev/null && flock 9
installed=$(node -p "require('$toolchain/node_modules/componentize-qjs/package.json').version" 2>/dev/null || true)
if [ "$installed" != "$QJS_VERSION" ]; then
  say "installing componentize-qjs $QJS_VERSION into $toolchain (npm: a 40 MB download, a few seconds)"
  cat >"$toolchain/package.json" <<EOF
{
  "name": "xdst-js-toolchain",
  "private": true,
  "description": "written by guest-sdk/js/build.sh: the tools that build xdst plugins written in JavaScript",
  "dependencies": { "componentize-qjs": "$QJS_VERSION" }
}
EOF
  npm install --prefix "$toolchain" --no-audit --no-fund --loglevel=error >&2 ||
    die "npm could not install componentize-qjs $QJS_VERSION into $toolchain"
fi
flock -u 9 2>/dev/null || true

# Build into a temporary file, then move it into place: OUT_WASM is never half written.
mkdir -p "$(dirname "$out")"
tmp=$(mktemp "$out.tmp.XXXXXX")
trap 'rm -f "$tmp" "$tmp.log"' EXIT
# --sync: plain (not component-model async) exports, which every host can call.
flags=(--sync)
# XDST_JS_STUB_WASI=1: replace every WASI import with a trap, so the component imports only
# xdst's interfaces; then an uncaught exception traps without a message, and so do Date and
# Math.random (see README.md).
if [ "${XDST_JS_STUB_WASI:-0}" = 1 ]; then flags+=(--stub-wasi); fi
say "componentizing ${entry#"$src"/} with QuickJS (componentize-qjs $QJS_VERSION, a few seconds)"
if ! node "$toolchain/node_modules/componentize-qjs/bin/componentize-qjs" \
  --wit "$wit" --world plugin --js "$entry" --module-root "$src" "${flags[@]}" -o "$tmp" >"$tmp.log" 2>&1; then
  cat "$tmp.log" >&2
  die "componentize-qjs failed on $entry (above: a syntax error, a failed import, or an exception while loading the module?)"
fi
chmod 0644 "$tmp"
mv "$tmp" "$out"
say "wrote $out ($(($(wc -c <"$out") / 1024)) KiB)"
