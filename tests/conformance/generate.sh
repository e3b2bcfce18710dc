#!/usr/bin/env bash
# Generates the ONNX 1.12 backend node conformance suite (about 900 test folders, each a
# model.onnx and test_data_set_*/input_*.pb, output_*.pb) into OUT/node, with the generator in
# the peers folder beside the repository (../shared/peers, or $KILN_PEERS_DIR) and a python3
# that has onnx and numpy (Debian's python3-onnx; scripts/install-deps.sh installs it).
# Cached: a suite that was generated completely before (OUT/.complete) is kept as it is.
# usage: generate.sh OUT
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: generate.sh OUT" >&2
  exit 2
fi
out=$1
# The reference and the compiled conformance tests both call this at once (ctest -j): one
# generates while the other waits here, then finds the suite complete.
mkdir -p "$(dirname "$out")"
exec 9>"$out.lock"
flock 9
if [ -f "$out/.complete" ] && [ -d "$out/node" ]; then
  exit 0
fi

repo=$(cd "$(dirname "$0")/../.." && pwd)
peers=${KILN_PEERS_DIR:-$repo/../shared/peers}
generator=$peers/gen_onnx_node_tests.py
if [ ! -f "$generator" ]; then
  echo "generate.sh: $generator is missing; the ONNX suite generator lives in the peers folder" \
    "beside the repository (../shared/peers) - check it out there or set KILN_PEERS_DIR" >&2
  exit 1
fi

python=$(bash "$repo/scripts/find-python.sh" generate.sh onnx numpy)

# Generate beside the target and move it in place, so an interrupted run leaves no half suite.
mkdir -p "$(dirname "$out")"
scratch=$(mktemp -d "$out.partial.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
if ! "$python" "$generator" "$scratch" >"$scratch.log" 2>&1; then
  echo "generate.sh: the generator failed; its output:" >&2
  tail -n 20 "$scratch.log" >&2
  rm -f "$scratch.log"
  exit 1
fi
rm -f "$scratch.log"
count=$(find "$scratch/node" -mindepth 2 -maxdepth 2 -name model.onnx 2>/dev/null | wc -l)
if [ "$count" -eq 0 ]; then
  echo "generate.sh: the generator wrote no test folders under $scratch/node" >&2
  exit 1
fi
mkdir -p "$out"
rm -rf "$out/node"
mv "$scratch/node" "$out/node"
touch "$out/.complete"
echo "generate.sh: $count ONNX node tests in $out/node"
