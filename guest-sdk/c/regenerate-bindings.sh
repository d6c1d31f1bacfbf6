#!/usr/bin/env bash
# Remakes guest-sdk/c/bindings/ (what the C recipe compiles against) from the WIT contract:
#
#   guest-sdk/c/regenerate-bindings.sh [WIT_DIR]     (default proto/wit/xdst-plugin-0.1.0)
#
# Only for a new WIT version: a released WIT is never edited, so the committed bindings stay
# right for it. Installs wit-bindgen-cli (pinned below) with `cargo install` into
# ${XDST_TOOLCHAINS:-~/.cache/xdst/toolchains}/wit-bindgen once (8-10 minutes on 2 cores), then
# writes plugin.c, plugin.h, plugin_component_type.o and WIT.sha256 (the WIT's digest, which
# build.sh compares with the WIT it is given).
set -euo pipefail

WIT_BINDGEN_VERSION=0.61.1 # the version of the wit-bindgen crate the Rust side uses

say() { echo "==> $*" >&2; }
die() {
    echo "error: $*" >&2
    exit 1
}

here=$(cd "$(dirname "$0")" && pwd)
wit=${1:-$here/../../proto/wit/xdst-plugin-0.1.0}
[ -f "$wit/plugin.wit" ] || die "no plugin.wit in $wit"
toolchain="${XDST_TOOLCHAINS:-$HOME/.cache/xdst/toolchains}/wit-bindgen"
bin="$toolchain/bin/wit-bindgen"
if ! "$bin" --version 2>/dev/null | grep -qx "wit-bindgen-cli $WIT_BINDGEN_VERSION"; then
    command -v cargo >/dev/null || die "cargo is needed to install wit-bindgen-cli (https://rustup.rs)"
    say "installing wit-bindgen-cli $WIT_BINDGEN_VERSION into $toolchain (cargo install, 8-10 minutes on 2 cores)"
    target=$(mktemp -d)
    trap 'rm -rf "$target"' EXIT
    cargo install wit-bindgen-cli --version "$WIT_BINDGEN_VERSION" --locked --root "$toolchain" \
        --target-dir "$target" >&2 || die "cargo install wit-bindgen-cli $WIT_BINDGEN_VERSION failed"
fi
"$bin" c "$wit" --world plugin --out-dir "$here/bindings" >&2
sha256sum <"$wit/plugin.wit" | cut -d' ' -f1 >"$here/bindings/WIT.sha256"
say "regenerated $here/bindings from $wit"
