#!/usr/bin/env bash
# Installs every Debian 12 package kiln's build, tests and tools need. Idempotent: when all
# packages are present it only checks (a few seconds) and touches nothing.
set -euo pipefail

packages=(
  cmake ninja-build make g++ clang-14 clang lld-14 llvm-14-tools libclang-rt-14-dev
  libboost-graph-dev libeigen3-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libonnx-dev libprotobuf-dev protobuf-compiler
  python3 python3-numpy python3-onnx ccache
  # PyTorch exports the seed workloads and is the reference that kiln's results are checked against
  python3-torch python3-torchvision
  # the Python package (python/): its bindings, its pytest suite, and `pip install .` from the
  # repository with Debian's setuptools and pip (no downloads; python3-venv for a test venv)
  python3-dev python3-pybind11 python3-pytest python3-setuptools python3-wheel python3-pip python3-venv
  # data-parallel training across processes (kiln-run --data-parallel under mpirun): Open MPI
  openmpi-bin libopenmpi-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
