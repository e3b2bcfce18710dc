#!/usr/bin/env bash
# Exports the seed workloads (seed MLP, LeNet-5, ResNet-18/50, VGG16, BERT-base encoder, small
# BERT) to ONNX with PyTorch, each beside a fixed input and PyTorch's output:
# OUT/NAME.onnx, OUT/NAME.input.npy, OUT/NAME.output.npy. The models and the exporter live in
# the peers folder beside the repository (../shared/peers, or $KILN_PEERS_DIR); PyTorch comes
# from Debian (scripts/install-deps.sh). Cached: a workload whose three files exist is kept.
# usage: export-seeds.sh OUT [NAME,NAME...]   (default: every workload)
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: export-seeds.sh OUT [NAME,NAME...]" >&2
  exit 2
fi
mkdir -p "$1"
out=$(cd "$1" && pwd) # absolute: the exporter runs from the peers folder
names=${2:-mlp_b1024,lenet5_b64,resnet18_b1,resnet18_b8,resnet50_b1,vgg16_b1,bert_base_s128,bert_mini_s128_b8}
repo=$(cd "$(dirname "$0")/.." && pwd)
peers=${KILN_PEERS_DIR:-$repo/../shared/peers}
if [ ! -f "$peers/export_onnx.py" ]; then
  echo "export-seeds.sh: $peers/export_onnx.py is missing; the exporter lives in the peers folder" \
    "beside the repository (../shared/peers) - check it out there or set KILN_PEERS_DIR" >&2
  exit 1
fi
mkdir -p "$out"
todo=()
for name in ${names//,/ }; do
  if [ ! -f "$out/$name.onnx" ] || [ ! -f "$out/$name.input.npy" ] || [ ! -f "$out/$name.output.npy" ]; then
    todo+=("$name")
  fi
done
[ ${#todo[@]} -eq 0 ] && exit 0

python=$(bash "$repo/scripts/find-python.sh" export-seeds.sh torch torchvision onnx)

# Export into a scratch folder and move each model's files in place only when all three exist,
# so an interrupted or concurrent run never leaves a half-written model behind.
scratch=$(mktemp -d "$out/.export.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
list=$(IFS=,; echo "${todo[*]}")
# The exporter builds every model before it seeds torch, so each export had other random
# weights, and a quality bar measured on a few exports (quantize/seeds: LeNet-5's entropy-
# calibrated SNR, 9.3 dB on one fresh clone against a floor of 10) could fail on the next.
# Seeded first, every export of a workload is the same file.
export_seeded='import sys, runpy, torch; torch.manual_seed(0); sys.argv = ["export_onnx.py"] + sys.argv[1:]; runpy.run_path("export_onnx.py", run_name="__main__")'
if ! (cd "$peers" && "$python" -c "$export_seeded" "$scratch" "$list") >"$scratch/log" 2>&1; then
  echo "export-seeds.sh: exporting $list failed; the exporter's output:" >&2
  tail -n 20 "$scratch/log" >&2
  exit 1
fi
for name in "${todo[@]}"; do
  for suffix in input.npy output.npy onnx; do # the .onnx last: its presence means complete
    if [ ! -f "$scratch/$name.$suffix" ]; then
      echo "export-seeds.sh: the exporter wrote no $name.$suffix (is '$name' a workload in models.py?)" >&2
      exit 1
    fi
    mv -f "$scratch/$name.$suffix" "$out/$name.$suffix"
  done
done
echo "export-seeds.sh: exported ${todo[*]} into $out"
