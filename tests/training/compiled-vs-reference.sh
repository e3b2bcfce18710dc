#!/usr/bin/env bash
# A seed model trained compiled must print the reference evaluator's loss sequence (within
# 1e-4 relative per step): kiln-run SEED.onnx --train mean, SGD, the same random inputs. For
# models whose training graphs are too big for the PyTorch checks of `make test` (BERT-mini:
# its LayerNorm weights are read broadcast and updated in place in one fused group).
# usage: compiled-vs-reference.sh KILN_RUN SEEDS_DIR NAME STEPS
set -euo pipefail
if [ $# -ne 4 ]; then
  echo "usage: compiled-vs-reference.sh KILN_RUN SEEDS_DIR NAME STEPS" >&2
  exit 2
fi
kilnrun=$1 seeds=$2 name=$3 steps=$4
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/../../scripts/export-seeds.sh" "$seeds" "$name" >/dev/null
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for engine in compiled reference; do
  flags=()
  [ $engine = reference ] && flags=(--reference)
  "$kilnrun" "$seeds/$name.onnx" "${flags[@]}" --train mean --optimizer sgd --lr 0.01 --steps "$steps" \
    >"$scratch/$engine" 2>&1 || { echo "$engine training failed:"; cat "$scratch/$engine"; exit 1; }
done
awk -v steps="$steps" '
  $1 == "step" && $3 == "loss" { if (FNR == NR) want[$2] = $4; else got[$2] = $4 }
  END {
    bad = 0
    for (i = 1; i <= steps; ++i) {
      if (!(i in want) || !(i in got)) { printf "step %d: a loss is missing\n", i; bad = 1; continue }
      err = got[i] - want[i]; if (err < 0) err = -err
      scale = want[i] < 0 ? -want[i] : want[i]
      if (!(err <= 1e-4 * scale)) { printf "step %d: compiled %s, reference %s\n", i, got[i], want[i]; bad = 1 }
      else printf "step %d: compiled %s, reference %s\n", i, got[i], want[i]
    }
    exit bad
  }' "$scratch/reference" "$scratch/compiled"
