#!/usr/bin/env bash
# One model-zoo check (bench/zoo/models.py): runs ZOO_DIR/NAME.onnx compiled on its exported
# inputs and checks the output against PyTorch's fp32 output within rtol 1e-4 and an absolute
# tolerance of 1e-5 times the output's largest magnitude (at least 1e-5): untrained networks
# with random weights produce activations far from unit scale (logits near 0.001 or near 100),
# where a fixed atol would be meaningless one way or the other. The models are exported by the
# fixture zoo/export-small (or, for the large ones, here) with bench/zoo/export.py.
# usage: check-zoo-model.sh KILN_RUN ZOO_DIR NAME
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: check-zoo-model.sh KILN_RUN ZOO_DIR NAME" >&2
  exit 2
fi
kilnrun=$1 zoo=$2 name=$3
repo=$(cd "$(dirname "$0")/../.." && pwd)
python=$(bash "$repo/scripts/find-python.sh" check-zoo-model.sh torch torchvision onnx numpy)
mkdir -p "$zoo"
if [ ! -f "$zoo/$name.onnx" ] || [ ! -f "$zoo/$name.out.npy" ]; then
  (cd "$repo/bench/zoo" && flock "$zoo/.lock" "$python" export.py "$zoo" "$name") >/dev/null
fi
atol=$("$python" -c "import numpy as np, sys; print('%g' % max(1e-5, 1e-5 * float(np.abs(np.load(sys.argv[1])).max())))" "$zoo/$name.out.npy")
inputs=()
for i in 0 1 2 3; do
  [ -f "$zoo/$name.in$i.npy" ] && inputs+=(--input "in$i=$zoo/$name.in$i.npy")
done
"$kilnrun" "$zoo/$name.onnx" "${inputs[@]}" --check "out=$zoo/$name.out.npy" --rtol 1e-4 --atol "$atol" | grep '^check'
