#!/usr/bin/env bash
# The xdst build recipe for C plugins.
#
#   guest-sdk/c/build.sh SRC_DIR OUT_WASM
#
# Compiles every SRC_DIR/src/*.c (or SRC_DIR/*.c when there is no src/) against the bindings
# for the world `plugin` of the xdst WIT contract (`bindings/` beside this script: what
# `wit-bindgen c` 0.61.1 generates from proto/wit/xdst-plugin-0.1.0, committed, so a build needs
# no binding generator; `regenerate-bindings.sh` remakes them), into a core WebAssembly module
# carrying the component-type section: xdst (and `xdst plugin build`) turn it into a component.
# The module must import nothing but `xdst:plugin/log@0.1.0`: no WASI, so no stdio, printf,
# getenv, time or files; this script checks that.
#
# Installs what is missing, once: the Debian packages clang, lld, wasi-libc,
# libclang-rt-dev-wasm32 and wabt (apt-get, needs root). Nothing goes into
# ${XDST_TOOLCHAINS:-~/.cache/xdst/toolchains}/c but a lock file.
#
# Environment: XDST_WIT (directory holding plugin.wit; default: the one in this repository;
# the bindings must have been generated from it), XDST_TOOLCHAINS, CFLAGS (added to the
# compiler's flags).
set -euo pipefail

say() { echo "==> $*" >&2; }
die() {
    echo "error: $*" >&2
    exit 1
}

[ $# -eq 2 ] || die "usage: $0 SRC_DIR OUT_WASM"
[ -d "$1" ] || die "source directory $1 does not exist"
src=$(cd "$1" && pwd)
out=$2
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
toolchain="${XDST_TOOLCHAINS:-$HOME/.cache/xdst/toolchains}/c"
wit=${XDST_WIT:-$(dirname "$0")/../../proto/wit/xdst-plugin-0.1.0}
[ -f "$wit/plugin.wit" ] || die "no plugin.wit in $wit (set XDST_WIT to the directory holding the xdst plugin WIT)"
bindings=$(dirname "$0")/bindings
[ -f "$bindings/plugin_component_type.o" ] || die "no C bindings in $bindings (they sit beside this recipe; xdst plugin build puts them there)"
# The bindings are those of one released WIT (a released WIT is never edited): refuse another.
generated_from=$(cat "$bindings/WIT.sha256")
[ "$(sha256sum <"$wit/plugin.wit" | cut -d' ' -f1)" = "$generated_from" ] ||
    die "$wit/plugin.wit is not the WIT the C bindings in $bindings were generated from (sha256 $generated_from); run guest-sdk/c/regenerate-bindings.sh"

mkdir -p "$toolchain"
# One installer at a time: concurrent builds wait here.
exec 9>"$toolchain/.lock"
if command -v flock >/dev/null; then flock 9; fi

# ---- Debian packages: compiler, linker, C library and compiler runtime for wasm32, wabt
builtins() { compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/wasi*/libclang_rt.builtins-wasm32.a" >/dev/null; }
missing=()
command -v clang >/dev/null || missing+=(clang)
command -v wasm-ld >/dev/null || missing+=(lld)
[ -f /usr/lib/wasm32-wasi/libc.a ] || [ -f /usr/lib/wasm32-wasip1/libc.a ] || missing+=(wasi-libc)
builtins || missing+=(libclang-rt-dev-wasm32)
command -v wasm-objdump >/dev/null || missing+=(wabt)
if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]} with apt-get (a minute or two)"
    [ "$(id -u)" = 0 ] || die "needs root to install ${missing[*]} (or install them yourself: apt-get install -y ${missing[*]})"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q "${missing[@]}" >&2; then
        say "refreshing the apt package lists"
        apt-get update -q >&2 && apt-get install -y -q "${missing[@]}" >&2 ||
            die "apt-get install ${missing[*]} failed"
    fi
fi
if [ -f /usr/lib/wasm32-wasip1/libc.a ]; then triple=wasm32-wasip1; else triple=wasm32-wasi; fi
clang --print-targets 2>/dev/null | grep -q wasm32 || die "$(command -v clang) cannot target wasm32; use Debian's clang"

flock -u 9 2>/dev/null || true

# ---- compile and link with the bindings
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
code_dir="$src/src"
[ -d "$code_dir" ] || code_dir="$src"
shopt -s nullglob
sources=("$code_dir"/*.c)
[ ${#sources[@]} -gt 0 ] || die "no C sources in $code_dir"
includes=(-I"$bindings" -I"$code_dir")
[ -d "$src/include" ] && includes+=(-I"$src/include")

say "compiling ${#sources[@]} C files from $code_dir (clang $(clang -dumpversion), $triple)"
# The stack (1 MiB) goes first in memory, so overflowing it traps instead of silently
# overwriting static data. --strip-debug drops libc's DWARF but keeps function names, which
# xdst shows in trap backtraces.
mkdir -p "$(dirname "$out")"
# shellcheck disable=SC2086 # CFLAGS is a list of flags
clang --target="$triple" --sysroot=/usr -mexec-model=reactor -O2 -Wall -Wextra -Werror \
    "${includes[@]}" ${CFLAGS:-} \
    "${sources[@]}" "$bindings/plugin.c" "$bindings/plugin_component_type.o" \
    -Wl,--stack-first -Wl,-z,stack-size=1048576 -Wl,--strip-debug -o "$work/plugin.wasm" ||
    die "compiling $src failed"

# ---- the module may import the log function and nothing else
imports=$(wasm-objdump -x "$work/plugin.wasm" | awk '/^[A-Z][a-z]+\[[0-9]+\]:/ {in_imports = /^Import/} in_imports && / <- / {print $NF}')
bad=$(echo "$imports" | grep -v '^xdst:plugin/log@0\.1\.0\.' | grep . || true)
if [ -n "$bad" ]; then
    die "the module imports $(echo "$bad" | tr '\n' ' ')- xdst plugins get no WASI: printf, puts, fopen, getenv, time and the like are not available. Log with xdst_plugin_log_log() and keep to memory and string functions."
fi
wasm-objdump -h "$work/plugin.wasm" | grep -q '"component-type:plugin"' ||
    die "the module lost its component-type:plugin section"

mv -f "$work/plugin.wasm" "$out"
say "built $out ($(stat -c %s "$out") bytes)"
