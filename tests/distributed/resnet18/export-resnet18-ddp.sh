#!/usr/bin/env bash
# Runs tests/distributed/resnet18/torch_resnet18_ddp.py into OUT unless its files there are complete (the
# frozen losses are written last) and newer than the script: PyTorch's initial ResNet-18
# weights, 40 samples, and the losses of DistributedDataParallel on 2 ranks and of a run with
# all but fc frozen, for ResNet18DataParallel.cpp.
# usage: export-resnet18-ddp.sh OUT
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: export-resnet18-ddp.sh OUT" >&2
  exit 2
fi
out=$1
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
exec 9>"$out/.resnet18-ddp-export.lock"
flock 9
last=$out/resnet18_ddp.frozen.losses
if [ -f "$last" ] && [ "$last" -nt "$here/torch_resnet18_ddp.py" ] && [ -f "$out/resnet18_ddp.ddp.losses" ] &&
  [ -f "$out/resnet18_ddp.safetensors" ] && [ -f "$out/resnet18_ddp_x.npy" ] && [ -f "$out/resnet18_ddp_labels.npy" ]; then
  exit 0
fi
python=${PYTHON:-/usr/bin/python3}
"$python" "$here/torch_resnet18_ddp.py" "$out"
