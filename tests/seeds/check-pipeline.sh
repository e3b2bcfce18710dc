#!/usr/bin/env bash
# The inference pipeline on one seed workload: runs `kiln-dump MODEL --pipeline=inference
# --stats` and checks the issue's targets: the memory plan's arena is at most 1.03 x its lower
# bound (the most bytes live at one step), and for the CNNs and BERTs the kernel count is at most
# half the ONNX node count. Prints the figures (and the pipeline's own time) either way.
# usage: check-pipeline.sh KILN_DUMP SEEDS_DIR NAME
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: check-pipeline.sh KILN_DUMP SEEDS_DIR NAME" >&2
  exit 2
fi
dump=$1 seeds=$2 name=$3
repo=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$seeds"
flock "$seeds/.lock" bash "$repo/scripts/export-seeds.sh" "$seeds" "$name"
model=$seeds/$name.onnx
onnx_nodes=$("$dump" "$model" --coverage | sed -n 's/.*opset [0-9]*, \([0-9]*\) nodes.*/\1/p')
stats=$("$dump" "$model" --pipeline=inference --stats 2>&1 >/dev/null)
value() { echo "$stats" | awk -v key="$1" 'index($0, key " ") == 1 { print $2 }'; }
kernels=$(value kernels) arena=$(value arena_bytes) bound=$(value lower_bound_bytes) naive=$(value naive_bytes)
pipeline_ms=$(echo "$stats" | awk '/^pass [0-9]+ / { sub(",", "", $5); total += $5 } END { printf "%.1f", total }')
echo "$name: onnx_nodes $onnx_nodes kernels $kernels arena_bytes $arena lower_bound_bytes $bound naive_bytes $naive pipeline_ms $pipeline_ms"
status=0
if ! awk -v a="$arena" -v b="$bound" 'BEGIN { exit !(a <= 1.03 * b) }'; then
  echo "FAIL $name: arena $arena bytes is more than 1.03 x the lower bound $bound" >&2
  status=1
fi
case $name in
resnet* | vgg* | bert*)
  if [ $((kernels * 2)) -gt "$onnx_nodes" ]; then
    echo "FAIL $name: $kernels kernels, more than half of the $onnx_nodes ONNX nodes" >&2
    status=1
  fi
  ;;
esac
exit $status
