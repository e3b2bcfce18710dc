#!/usr/bin/env bash
# One training check against PyTorch on a seed ONNX export: kiln-run --train mean from the
# exported weights and input must print PyTorch's loss sequence (tests/training/torch_losses.py)
# within 1e-4 relative per step, compiled and on the reference evaluator, for
#   --train mean: 5 SGD steps (lr 0.01), 2 Adam steps (lr 0.001; the second loss shows the
#   first update);
#   --train cross-entropy --labels (class i % 10): 3 SGD steps (lr 0.01, momentum 0.9);
# and, compiled, 3 SGD steps saved to .safetensors then 2 more loaded from it must continue the
# same sequence (steps 4 and 5).
# The export and PyTorch's losses are cached in SEEDS_DIR (tests/training/torch-losses.sh makes
# them when missing or stale; the training/torch-losses fixture makes both models' in one run).
# usage: check-losses.sh KILN_RUN SEEDS_DIR NAME
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: check-losses.sh KILN_RUN SEEDS_DIR NAME" >&2
  exit 2
fi
kilnrun=$1 seeds=$2 name=$3
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/torch-losses.sh" "$seeds" "$name"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
model=$seeds/$name.onnx input=x=$seeds/$name.input.npy
failed=0

# compare LABEL EXPECTED_FILE GOT_FILE [FIRST_STEP]: every expected loss from step FIRST_STEP
# (default 1) on must be printed, within 1e-4 relative.
compare() {
  local label=$1 want=$2 got=$3 first=${4:-1}
  if ! awk -v label="$label" -v first="$first" '
    FNR == NR { want[FNR] = $1; n = FNR; next }
    $1 == "step" && $3 == "loss" { got[$2] = $4 }
    END {
      bad = 0; worst = 0
      for (i = first; i <= n; ++i) {
        if (!(i in got)) { printf "%s: step %d printed no loss\n", label, i; bad = 1; continue }
        err = got[i] - want[i]; if (err < 0) err = -err
        scale = want[i] < 0 ? -want[i] : want[i]
        rel = scale > 0 ? err / scale : err
        if (rel > worst) worst = rel
        if (!(rel <= 1e-4)) {
          printf "%s: step %d loss %s, PyTorch %s (rel error %.3g > 1e-4)\n", label, i, got[i], want[i], rel
          bad = 1
        }
      }
      if (!bad) printf "%s: steps %d-%d match PyTorch (max rel error %.3g)\n", label, first, n, worst
      exit bad
    }' "$want" "$got"; then
    echo "--- kiln-run printed:"
    cat "$got"
    failed=1
  fi
}

for engine in compiled reference; do
  flags=()
  [ $engine = reference ] && flags=(--reference)
  start=$(date +%s.%N)
  "$kilnrun" "$model" --input "$input" "${flags[@]}" --train mean --optimizer sgd --lr 0.01 --steps 5 \
    >"$scratch/sgd.$engine" || failed=1
  compare "$name $engine sgd" "$seeds/$name.sgd.losses" "$scratch/sgd.$engine"
  "$kilnrun" "$model" --input "$input" "${flags[@]}" --train mean --optimizer adam --lr 0.001 --steps 2 \
    >"$scratch/adam.$engine" || failed=1
  compare "$name $engine adam" "$seeds/$name.adam.losses" "$scratch/adam.$engine"
  "$kilnrun" "$model" --input "$input" "${flags[@]}" --train cross-entropy --labels "$seeds/$name.labels.npy" \
    --optimizer sgd --lr 0.01 --momentum 0.9 --steps 3 >"$scratch/ce.$engine" || failed=1
  compare "$name $engine cross-entropy sgd momentum" "$seeds/$name.ce.losses" "$scratch/ce.$engine"
  awk -v name="$name" -v engine="$engine" -v start="$start" -v end="$(date +%s.%N)" \
    'BEGIN { printf "%s: %s runs took %.1f s\n", name, engine, end - start }'
done

"$kilnrun" "$model" --input "$input" --train mean --optimizer sgd --lr 0.01 --steps 3 \
  --save "$scratch/after3.safetensors" >"$scratch/first3" 2>/dev/null || failed=1
"$kilnrun" "$model" --input "$input" --train mean --optimizer sgd --lr 0.01 --steps 2 \
  --load "$scratch/after3.safetensors" >"$scratch/resumed" || failed=1
compare "$name compiled sgd resumed from --save after 3 steps" "$seeds/$name.sgd.losses" "$scratch/resumed" 4

exit $failed
