#!/usr/bin/env bash
# pip install --no-build-isolation of the repository into a fresh venv (--system-site-packages,
# for Debian's numpy), offline, then the installed package - not the build tree's - imported
# from another folder, compiling and running a tiny model and a training step. The extension is
# the one this build made (setup.py's KILN_PIP_PREBUILT), so the test checks the packaging in
# a minute rather than compiling kiln again. Exit 77 (CTest: skipped) without venv or pip.
# usage: pip-install.sh PYTHON SOURCE_DIR EXTENSION
set -euo pipefail
python=$1 source=$2 extension=$3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
if ! "$python" -m venv --system-site-packages "$scratch/venv" >/dev/null 2>&1 ||
   ! "$scratch/venv/bin/python" -m pip --version >/dev/null 2>&1; then
  echo "pip-install.sh: $python has no venv or pip (scripts/install-deps.sh installs python3-venv): skipped"
  exit 77
fi
# setuptools writes its build folder under build-pip/ of the source (ignored by git): a copy
# of the tracked files keeps the checkout clean and the test independent of what lies there.
mkdir -p "$scratch/src"
if git -C "$source" rev-parse --show-toplevel >/dev/null 2>&1; then
  # Tracked and new files as they are in the checkout (one deleted but still tracked is skipped).
  (cd "$source" && git ls-files -z --cached --others --exclude-standard |
     xargs -0 sh -c 'for f; do [ -e "$f" ] && cp --parents "$f" "$0"; done' "$scratch/src")
else
  tar -C "$source" --exclude='./build' --exclude='./build-*' -cf - . | tar -C "$scratch/src" -xf -
fi
KILN_PIP_PREBUILT=$extension PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
  "$scratch/venv/bin/python" -m pip install --no-build-isolation --no-deps -q "$scratch/src"
cd "$scratch"
PYTHONPATH= "$scratch/venv/bin/python" - "$scratch/venv" <<'PY'
import sys
import numpy as np
import kiln

assert kiln.__file__.startswith(sys.argv[1]), f"kiln imported from {kiln.__file__}, not the venv"
g = kiln.GraphBuilder("tiny")
x = g.input("x", "f32", [4, 3])
w = g.param("w", np.full((2, 3), 0.5, np.float32))
graph = g.finish({"y": kiln.linear(x, w)})
y = kiln.compile(graph, threads=1).run({"x": np.ones((4, 3), np.float32)})["y"]
assert np.allclose(y, 1.5), y
step = kiln.compile_training_step(graph, loss="mean", optimizer=kiln.optim.SGD(0.1), threads=1)
losses = [step.step({"x": np.ones((4, 3), np.float32)}) for _ in range(2)]
assert losses[0] == 1.5 and losses[1] < losses[0], losses
print("installed kiln", kiln.__file__, "runs: y =", y[0], "losses", losses)
PY
