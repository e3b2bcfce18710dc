#!/usr/bin/env bash
# Prints the first Python that imports every module named: $PYTHON, then Debian's
# /usr/bin/python3 (where scripts/install-deps.sh puts python3-torch, python3-onnx and the rest),
# then python3 on PATH. When none does, says so on stderr in CALLER's name and exits 1.
# usage: find-python.sh CALLER MODULE...
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: find-python.sh CALLER MODULE..." >&2
  exit 2
fi
caller=$1
shift
imports=$(IFS=,; echo "$*")
for candidate in "${PYTHON:-}" /usr/bin/python3 python3; do
  if [ -n "$candidate" ] && "$candidate" -c "import $imports" >/dev/null 2>&1; then
    echo "$candidate"
    exit 0
  fi
done
echo "$caller: no python3 with the modules $* (scripts/install-deps.sh installs them from Debian's" \
  "python3-* packages; or set PYTHON)" >&2
exit 1
