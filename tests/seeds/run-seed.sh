#!/usr/bin/env bash
# One seed-workload check: exports NAME with PyTorch (once; cached in SEEDS_DIR), imports the
# ONNX model with kiln and runs it with PyTorch's input twice: on the reference evaluator and
# compiled (generated kernels). Fails unless every output element of both is within rtol 1e-4,
# atol 1e-5 of PyTorch's. Prints kiln-run's check lines, which name the worst absolute and
# relative error.
# usage: run-seed.sh KILN_RUN SEEDS_DIR NAME
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: run-seed.sh KILN_RUN SEEDS_DIR NAME" >&2
  exit 2
fi
kilnrun=$1 seeds=$2 name=$3
repo=$(cd "$(dirname "$0")/../.." && pwd)
# Concurrent tests export different models; flock keeps the exporter's runs from interleaving.
mkdir -p "$seeds"
flock "$seeds/.lock" bash "$repo/scripts/export-seeds.sh" "$seeds" "$name"
for engine in --reference --compiled; do
  start=$(date +%s.%N)
  flags=()
  [ "$engine" = --reference ] && flags=(--reference)
  echo "$name ${engine#--}:"
  "$kilnrun" "$seeds/$name.onnx" "${flags[@]}" --input "x=$seeds/$name.input.npy" \
    --check "y=$seeds/$name.output.npy" --rtol 1e-4 --atol 1e-5 | grep -v '^y: '
  awk -v name="$name" -v engine="${engine#--}" -v start="$start" -v end="$(date +%s.%N)" \
    'BEGIN { printf "%s: import and %s run took %.1f s\n", name, engine, end - start }'
done
