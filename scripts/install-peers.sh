#!/usr/bin/env bash
# Installs the peers that `make bench` measures kiln against, idempotently (a second run only checks):
#   PyTorch (CPU) and numpy from Debian (scripts/install-deps.sh already installs python3-torch),
#   OpenBLAS with OpenMP behind numpy and PyTorch, and ONNX Runtime 1.30 (CPU) through its Node.js
#   binding, into ${1:-$KILN_PEERS_CACHE or $HOME/.cache/kiln-peers}/node_modules.
# Node.js: an existing `node` is used as is (Debian's nodejs/npm packages conflict with a node
# installed from elsewhere); only when there is no `node` are Debian's nodejs and npm installed.
# usage: install-peers.sh [DIR]
set -euo pipefail
dir=${1:-${KILN_PEERS_CACHE:-$HOME/.cache/kiln-peers}}
export DEBIAN_FRONTEND=noninteractive

apt_install() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-peers.sh: missing $*; run as root or install them (apt-get install $*)" >&2
    exit 1
  fi
  apt-get update -qq
  apt-get install -y -qq "$@" >/dev/null
}

# Debian packages: install only what is missing, so a ready machine needs no network.
missing=()
for pkg in python3-torch python3-numpy libopenblas0-openmp; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if ! command -v node >/dev/null 2>&1; then
  missing+=(nodejs npm)
elif ! command -v npm >/dev/null 2>&1; then
  echo "install-peers.sh: node is installed but npm is not; install npm beside that node" >&2
  exit 1
fi
[ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"

mkdir -p "$dir"
if [ ! -f "$dir/node_modules/onnxruntime-node/package.json" ]; then
  # --ignore-scripts: the package already holds the Linux x64 CPU library; its install script
  # only fetches GPU extras.
  (cd "$dir" && { [ -f package.json ] || npm init -y >/dev/null; } &&
    npm install --ignore-scripts --no-audit --no-fund onnxruntime-node@1.30.0 >/dev/null)
fi
if ! NODE_PATH="$dir/node_modules" node -e "require('onnxruntime-node')" >/dev/null 2>&1; then
  echo "install-peers.sh: onnxruntime-node in $dir/node_modules does not load with $(node --version)" >&2
  exit 1
fi
echo "install-peers.sh: peers ready (ONNX Runtime in $dir/node_modules)"
