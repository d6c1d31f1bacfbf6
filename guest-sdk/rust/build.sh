#!/usr/bin/env bash
# The Rust build recipe for xdst plugins: build.sh SRC_DIR OUT_WASM
# Builds the crate in SRC_DIR for wasm32-unknown-unknown (adding the target with rustup if it
# is missing) and copies the module to OUT_WASM. The module embeds the WIT world; xdst makes it
# a component (`xdst plugin build` writes the component; `xdst serve` accepts either).
set -euo pipefail
src=$(cd "${1:?usage: build.sh SRC_DIR OUT_WASM}" && pwd)
out=${2:?usage: build.sh SRC_DIR OUT_WASM}
command -v cargo >/dev/null || { echo "error: cargo not found; install Rust from https://rustup.rs" >&2; exit 1; }
if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  echo "==> adding the wasm32-unknown-unknown target (rustup, about a minute)" >&2
  rustup target add wasm32-unknown-unknown >&2
fi
if [ ! -f "$src/wit/plugin.wit" ] && [ -n "${XDST_WIT:-}" ]; then
  mkdir -p "$src/wit" && cp "$XDST_WIT/plugin.wit" "$src/wit/plugin.wit"
fi
target=${CARGO_TARGET_DIR:-$src/target}
echo "==> cargo build --release --target wasm32-unknown-unknown (first build fetches and compiles dependencies: about a minute)" >&2
CARGO_TARGET_DIR=$target cargo build --release --target wasm32-unknown-unknown --manifest-path "$src/Cargo.toml" >&2
name=$(sed -n 's/^name *= *"\(.*\)"/\1/p' "$src/Cargo.toml" | head -1 | tr - _)
mkdir -p "$(dirname "$out")"
cp "$target/wasm32-unknown-unknown/release/$name.wasm" "$out"
echo "==> wrote $out" >&2
