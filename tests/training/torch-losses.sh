#!/usr/bin/env bash
# Makes PyTorch's loss sequences for the training checks (torch_losses.py) in SEEDS_DIR: exports
# the seeds first (scripts/export-seeds.sh, cached), then runs PyTorch once for every NAME whose
# SEEDS_DIR/NAME.{sgd,adam,ce}.losses are missing or older than the model or the script.
# usage: torch-losses.sh SEEDS_DIR NAME[,NAME...]
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: torch-losses.sh SEEDS_DIR NAME[,NAME...]" >&2
  exit 2
fi
seeds=$1 names=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$seeds"
# The same lock as the seed tests: concurrent exports into one folder must not interleave.
flock "$seeds/.lock" bash "$here/../../scripts/export-seeds.sh" "$seeds" "$names"
exec 9>"$seeds/.torch-losses.lock"
flock 9
stale=()
for name in ${names//,/ }; do
  for suffix in sgd adam ce; do
    file=$seeds/$name.$suffix.losses
    if ! { [ -f "$file" ] && [ "$file" -nt "$seeds/$name.onnx" ] && [ "$file" -nt "$here/torch_losses.py" ]; }; then
      stale+=("$name")
      break
    fi
  done
done
[ ${#stale[@]} -eq 0 ] && exit 0
python=${PYTHON:-/usr/bin/python3}
list=$(IFS=,; echo "${stale[*]}")
"$python" "$here/torch_losses.py" "$seeds" "$list"
