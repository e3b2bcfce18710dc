#!/usr/bin/env bash
# Runs tests/training/export_resnet18.py into OUT unless its files there are complete (the
# losses file is written last) and newer than the script: PyTorch's initial ResNet-18 weights,
# a batch of 8, the loss sequence of 5 SGD steps and the BatchNorm buffers after them, for
# ResNet18Training.cpp.
# usage: export-resnet18.sh OUT
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: export-resnet18.sh OUT" >&2
  exit 2
fi
out=$1
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
exec 9>"$out/.resnet18-export.lock"
flock 9
losses=$out/resnet18_train.sgd.losses
if [ -f "$losses" ] && [ "$losses" -nt "$here/export_resnet18.py" ] && [ -f "$out/resnet18_train.safetensors" ] &&
  [ -f "$out/resnet18_train.input.npy" ] && [ -f "$out/resnet18_train.buffers.safetensors" ]; then
  exit 0
fi
python=${PYTHON:-/usr/bin/python3}
"$python" "$here/export_resnet18.py" "$out"
