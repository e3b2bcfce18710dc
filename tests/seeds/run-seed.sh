#!/usr/bin/env bash
# One seed-workload check: exports NAME with PyTorch (once; cached in SEEDS_DIR), imports the
# ONNX model with kiln and runs it with PyTorch's input twice: on the reference evaluator and
# compiled (generated kernels). Fails unless every output element of both is within rtol 1e-4,
# atol 1e-5 of the ground truth: the exported graph run with PyTorch's operators in float64
# (torch_float64.py), stored rounded to fp32 as NAME.output64.f32.npy (kiln-run's --check wants
# the output's dtype; the rounding is ~6e-8 relative). Not PyTorch's own fp32 output
# (NAME.output.npy): on AMD Zen 4 that is up to 1.0e-4 off the exact result (ResNet-50, max
# |y| 83.5), more than the tolerance allows at small logits. Prints kiln-run's check lines, which
# name the worst absolute and relative error.
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

# The float64 ground truth, made here rather than in export-seeds.sh since only this check reads
# it (the benchmarks and training checks export too). Cached beside the export; remade when the
# model, the input or torch_float64.py is newer. torch_float64.py writes it whole (renamed into
# place), so a concurrent or interrupted run never leaves half a file.
truth=$seeds/$name.output64.f32.npy
script=$repo/tests/seeds/torch_float64.py
if [ ! -f "$truth" ] || [ "$seeds/$name.onnx" -nt "$truth" ] || [ "$seeds/$name.input.npy" -nt "$truth" ] ||
   [ "$script" -nt "$truth" ]; then
  python=$(bash "$repo/scripts/find-python.sh" run-seed.sh torch onnx)
  # Also prints how far PyTorch's fp32 output is from the float64 result (informational).
  "$python" "$script" --float32 "$seeds/$name.onnx" "$seeds/$name.input.npy" "$truth" \
    "$seeds/$name.output.npy"
fi

for engine in --reference --compiled; do
  start=$(date +%s.%N)
  flags=()
  [ "$engine" = --reference ] && flags=(--reference)
  echo "$name ${engine#--}:"
  "$kilnrun" "$seeds/$name.onnx" "${flags[@]}" --input "x=$seeds/$name.input.npy" \
    --check "y=$truth" --rtol 1e-4 --atol 1e-5 | grep -v '^y: '
  awk -v name="$name" -v engine="${engine#--}" -v start="$start" -v end="$(date +%s.%N)" \
    'BEGIN { printf "%s: import and %s run took %.1f s\n", name, engine, end - start }'
done
