#!/usr/bin/env bash
# Translates every case in cases/ with one plugin and compares the result with the reference's.
#   tests/conformance/check.sh PLUGIN.wasm [CASE...]
# XDST names the xdst binary (default: xdst on PATH). Exit status 1 if any case differs.
# This is the quick loop for porting; the suite CI runs is tests/it/conformance.rs.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
plugin=$(realpath "${1:?usage: check.sh PLUGIN.wasm [CASE...]}"); shift
xdst=${XDST:-xdst}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/plugins" && cp "$plugin" "$work/plugins/"
cases=("$@"); [ ${#cases[@]} -eq 0 ] && cases=($(ls "$here/cases"))
failed=0
for c in "${cases[@]}"; do
  dir="$here/cases/$c"
  rm -rf "$work/intent" && mkdir "$work/intent" && cp "$dir/intent.yaml" "$work/intent/"
  if RUST_LOG=${RUST_LOG:-off} "$xdst" translate --intent "$work/intent" --plugins "$work/plugins" --format yaml >"$work/out.yaml" 2>"$work/err.txt"; then
    if [ -f "$dir/expected.yaml" ]; then
      if diff -u "$dir/expected.yaml" "$work/out.yaml" >"$work/diff"; then echo "ok   $c"; else echo "DIFF $c"; cat "$work/diff"; failed=1; fi
    else echo "DIFF $c: translated, but the reference fails: $(grep -v '^#' "$dir/expected-error.yaml" | tr '\n' ' ')"; failed=1; fi
  else
    err=$(grep '^Error:' "$work/err.txt" || tail -3 "$work/err.txt")
    if [ -f "$dir/expected-error.yaml" ]; then
      doc=$(sed -n 's/^document: //p' "$dir/expected-error.yaml"); field=$(sed -n 's/^field: //p' "$dir/expected-error.yaml")
      if [[ "$err" == *"): $doc field $field: "* ]]; then echo "ok   $c"; else echo "DIFF $c: expected an error at $doc field $field, got: $err"; failed=1; fi
    else echo "DIFF $c: the reference translates it, this plugin fails: $err"; failed=1; fi
  fi
done
exit $failed
