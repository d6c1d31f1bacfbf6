#!/usr/bin/env bash
# Builds an xdst plugin written in Python into a WebAssembly component.
#
#   guest-sdk/python/build.sh SRC_DIR OUT_WASM
#
# SRC_DIR holds `app.py`, the module that defines `class WitWorld` with `describe()` and
# `translate(request)` (the exports of the WIT world `plugin` in $XDST_WIT), plus any other
# modules and packages it imports. Only the standard library is available at run time.
#
# Installs what it needs when missing, pinned, into
# ${XDST_TOOLCHAINS:-$HOME/.cache/xdst/toolchains}/python: a virtualenv holding
# componentize-py (which embeds CPython for wasm32-wasi and its standard library).
# Idempotent: a second run installs nothing.
#
# XDST_WIT: the directory holding plugin.wit (default: proto/wit/xdst-plugin-0.1.0 of the
# repository this script is in).
set -euo pipefail

COMPONENTIZE_PY_VERSION=0.25.1

say() { echo "==> $*" >&2; }
die() { echo "error: $*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: $0 SRC_DIR OUT_WASM"
src=$1
out=$2
[ -d "$src" ] || die "$src is not a directory"
[ -f "$src/app.py" ] || die "$src/app.py is missing: it must define class WitWorld (see guest-sdk/python/README.md)"
src=$(cd "$src" && pwd)

wit=${XDST_WIT:-$(dirname "$0")/../../proto/wit/xdst-plugin-0.1.0}
[ -f "$wit/plugin.wit" ] || die "no plugin.wit in $wit (set XDST_WIT to the directory of the WIT contract)"
wit=$(cd "$wit" && pwd)

root=${XDST_TOOLCHAINS:-$HOME/.cache/xdst/toolchains}/python
venv=$root/componentize-py-$COMPONENTIZE_PY_VERSION
cpy=$venv/bin/componentize-py

# A Python 3 with venv, for the virtualenv that holds componentize-py.
python=$(command -v python3 || true)
if [ -z "$python" ] || ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
  command -v apt-get >/dev/null || die "python3 with the venv module is needed (and apt-get is not here to install it)"
  say "installing python3 and python3-venv with apt-get (about a minute)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y python3 python3-venv >&2 || {
    apt-get update >&2 && apt-get install -y python3 python3-venv >&2
  } || die "apt-get install python3 python3-venv failed"
  python=$(command -v python3) || die "python3 is still missing"
fi

# The stamp is written last, so an interrupted install is redone, not trusted.
if [ ! -f "$venv/.installed" ] || [ ! -x "$cpy" ]; then
  say "installing componentize-py $COMPONENTIZE_PY_VERSION into $venv (a 17 MB download, under a minute)"
  rm -rf "$venv"
  mkdir -p "$root"
  "$python" -m venv "$venv" >&2 || die "could not create a virtualenv with $python"
  "$venv/bin/python" -m pip install --disable-pip-version-check --quiet \
      "componentize-py==$COMPONENTIZE_PY_VERSION" >&2 \
    || { rm -rf "$venv"; die "pip install componentize-py==$COMPONENTIZE_PY_VERSION failed"; }
  "$cpy" --version >&2 || { rm -rf "$venv"; die "componentize-py does not run"; }
  touch "$venv/.installed"
fi

mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
say "componentizing $src/app.py into $out (it embeds CPython 3.14: ~18 MB, 20-30 s)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Build from a copy of the sources: componentize-py imports app.py while it builds (to
# snapshot the initialised interpreter) and would leave __pycache__ in SRC_DIR otherwise.
mkdir "$work/src"
tar -C "$src" --exclude=./build --exclude=__pycache__ --exclude=.git --exclude=.venv \
    --exclude=node_modules -cf - . | tar -C "$work/src" -xf -
cd "$work"
"$cpy" -d "$wit" -w plugin componentize app -p "$work/src" -o "$work/out.wasm" >&2 \
  || die "componentize-py failed for $src (see its message above)"
mv "$work/out.wasm" "$out"
say "built $out ($(($(wc -c <"$out") / 1000000)) MB)"
