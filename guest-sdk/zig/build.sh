#!/usr/bin/env bash
# The xdst build recipe for Zig plugins (the core-module ABI, proto/core-abi, over
# wasm32-freestanding: no WASI at all).
#
#   guest-sdk/zig/build.sh SRC_DIR OUT_WASM
#
# Builds SRC_DIR/main.zig (which declares the plugin's `info` and `translate` and calls
# `xdst.exportPlugin(@This())`) with the xdst SDK as the module `xdst`:
#   zig build-exe -target wasm32-freestanding -fno-entry -rdynamic -fstrip -O ReleaseFast \
#     --dep xdst -Mroot=SRC_DIR/main.zig -Mxdst=SDK/xdst.zig
# where SDK is SRC_DIR/sdk (what `xdst plugin new` copies there) or else the sdk/ beside this
# script. Then checks the module: it must export the ABI marker, memory, xdst_alloc,
# xdst_describe and xdst_translate, and import nothing but xdst.log.
# Installs what it needs when missing, into ${XDST_TOOLCHAINS:-$HOME/.cache/xdst/toolchains}/zig:
#   - Zig at the version pinned below, from PyPI's ziglang (a Python venv; python3 with its
#     venv module is the only prerequisite);
#   - Zig's global and local caches, kept there.
# Safe to run again and concurrently (a lock guards the toolchain directory while it is set
# up). Progress goes to stderr as `==> ` lines. The core-module ABI needs no WIT, so $XDST_WIT
# is not read.
set -euo pipefail

ZIG_VERSION=0.17.1           # PyPI ziglang
OPTIMIZE=ReleaseFast         # measured faster per call than ReleaseSmall (guest-sdk/zig/README.md)

say() { echo "==> $*" >&2; }
die() { echo "error: $*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: $0 SRC_DIR OUT_WASM"
src=$(cd "$1" 2>/dev/null && pwd) || die "no such directory: $1"
out=$2
[ -f "$src/main.zig" ] || die "$src/main.zig not found: a Zig plugin's root file is main.zig"
if [ -f "$src/sdk/xdst.zig" ]; then
  sdk=$src/sdk
else
  sdk=$(cd "$(dirname "$0")" && pwd)/sdk
  [ -f "$sdk/xdst.zig" ] || die "the xdst SDK is neither in $src/sdk nor in $sdk (xdst plugin new copies it to sdk/)"
fi

tc=${XDST_TOOLCHAINS:-$HOME/.cache/xdst/toolchains}/zig
mkdir -p "$tc"
exec 9>"$tc/.lock"
flock 9 2>/dev/null || true

# --- Zig ------------------------------------------------------------------------------------
py=$tc/venv/bin/python
zig() { "$py" -m ziglang "$@"; }
if [ ! -x "$py" ] || [ "$(zig version 2>/dev/null)" != "$ZIG_VERSION" ]; then
  command -v python3 >/dev/null 2>&1 || die "python3 is needed to install Zig (from PyPI's ziglang)"
  say "installing Zig $ZIG_VERSION into $tc (pip ziglang; about 30 s, 400 MB)"
  rm -rf "$tc/venv"
  python3 -m venv "$tc/venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
  "$py" -m pip install --quiet --disable-pip-version-check "ziglang==$ZIG_VERSION" >&2 \
    || die "pip install ziglang==$ZIG_VERSION failed"
  [ "$(zig version 2>/dev/null)" = "$ZIG_VERSION" ] || die "ziglang $ZIG_VERSION installed no working zig"
fi
export ZIG_GLOBAL_CACHE_DIR=$tc/cache/global ZIG_LOCAL_CACHE_DIR=$tc/cache/local

# The toolchain is ready: other builds may go ahead while this one compiles.
flock -u 9 2>/dev/null || true

mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
tmp=$(mktemp "$(dirname "$out")/.zig-XXXXXX")
trap 'rm -f "$tmp"' EXIT

# --- compile --------------------------------------------------------------------------------
say "compiling $src/main.zig with zig $ZIG_VERSION (wasm32-freestanding, -O $OPTIMIZE, SDK $sdk)"
(cd "$src" && zig build-exe -target wasm32-freestanding -fno-entry -rdynamic -fstrip -O "$OPTIMIZE" \
  --dep xdst -Mroot="$src/main.zig" -Mxdst="$sdk/xdst.zig" --name plugin -femit-bin="$tmp") \
  || die "zig build-exe failed in $src"

# The module's shape, read from its import and export sections by a small Python program
# (python3 is already needed for the venv).
python3 - "$tmp" "$src" <<'PY' || die "the module was not written (guest-sdk/zig/README.md lists the exports)"
"""Checks a module against xdst's core-module ABI: the exports xdst needs, and no import but
xdst.log. Arguments: MODULE.wasm SRC_DIR"""
import sys


class Reader:
    def __init__(self, b, i):
        self.b, self.i = b, i

    def byte(self):
        c = self.b[self.i]
        self.i += 1
        return c

    def u32(self):
        v = s = 0
        while True:
            c = self.byte()
            v |= (c & 0x7F) << s
            if c < 0x80:
                return v
            s += 7

    def name(self):
        n = self.u32()
        s = self.b[self.i : self.i + n].decode("utf-8", "replace")
        self.i += n
        return s

    def limits(self):
        flags = self.byte()
        self.u32()
        if flags & 1:
            self.u32()


def main():
    path, src = sys.argv[1], sys.argv[2]
    b = open(path, "rb").read()
    if len(b) < 8 or b[:4] != b"\0asm":
        sys.exit(f"error: {src} did not build a wasm module")
    problems, exports = [], {}
    r = Reader(b, 8)
    try:
        while r.i < len(b):
            section, size = r.byte(), r.u32()
            end = r.i + size
            if section == 2:
                for _ in range(r.u32()):
                    mod, name, kind = r.name(), r.name(), r.byte()
                    if kind == 0:
                        r.u32()
                    elif kind == 1:
                        r.byte()
                        r.limits()
                    elif kind == 2:
                        r.limits()
                    elif kind == 3:
                        r.byte()
                        r.byte()
                    if (mod, name) != ("xdst", "log"):
                        problems.append(f"imports {mod}.{name}: xdst allows only xdst.log (wasm32-freestanding has no WASI)")
            elif section == 7:
                for _ in range(r.u32()):
                    name, kind = r.name(), r.byte()
                    r.u32()
                    exports[name] = kind
            r.i = end
    except IndexError:
        sys.exit(f"error: {path} is truncated")
    wanted = [("xdst_plugin_abi_0_1_0", 0, "function"), ("memory", 2, "memory"), ("xdst_alloc", 0, "function"),
              ("xdst_describe", 0, "function"), ("xdst_translate", 0, "function")]
    for name, kind, what in wanted:
        if exports.get(name) != kind:
            problems.append(f"does not export {what} {name} (call xdst.exportPlugin(@This()) in main.zig)")
    if problems:
        sys.exit(f"error: {src} does not make an xdst core-ABI plugin:\n  " + "\n  ".join(problems))


main()
PY
chmod 644 "$tmp"
mv -f "$tmp" "$out"
say "built $out ($(wc -c <"$out") bytes)"
