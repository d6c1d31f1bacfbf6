#!/usr/bin/env bash
# Regenerates host/core/gen/envoy-descriptors.bin: a protobuf FileDescriptorSet of every
# Envoy API file (with its imports) from the envoy-types crate the workspace resolves, so
# the JSON/YAML decoder and the typed structs describe the same Envoy version.
#
#   host/core/gen/envoy-descriptors.sh          rewrite the file
#   host/core/gen/envoy-descriptors.sh --check  exit 1 if the checked-in file is stale
#
# Needs protoc (Debian: protobuf-compiler). protox is not used: it resolves relative type
# names against packages a file does not import, and Envoy's protos rely on protoc's rule.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="$here/envoy-descriptors.bin"

manifest="$(cargo metadata --format-version 1 --manifest-path "$root/Cargo.toml" |
  python3 -c 'import json,sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"]=="envoy-types"))')"
protos="$(dirname "$manifest")/proto"

tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
(cd "$protos/data-plane-api" && find envoy -name '*.proto' | LC_ALL=C sort) |
  (cd "$protos" && xargs protoc --include_imports -o "$tmp" \
    -Idata-plane-api -Ixds -Iprotoc-gen-validate -Igoogleapis -Icel-spec/proto \
    -Iopentelemetry-proto -Iclient_model)

if [[ "${1:-}" == "--check" ]]; then
  if ! cmp -s "$tmp" "$out"; then
    echo "host/core/gen/envoy-descriptors.bin is stale: run host/core/gen/envoy-descriptors.sh" >&2
    exit 1
  fi
  echo "envoy descriptors up to date ($(stat -c %s "$out") bytes)"
else
  cp "$tmp" "$out"
  echo "wrote $out ($(stat -c %s "$out") bytes)"
fi
