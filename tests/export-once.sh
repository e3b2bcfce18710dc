#!/usr/bin/env bash
# Runs a PyTorch export script (`python SCRIPT OUT`) for a test fixture, unless its files in OUT
# are already complete: LAST (which the script writes last) newer than the script, and every
# OTHER file present. A lock in OUT keeps two ctest jobs from exporting at once.
# Used by training/export-resnet18 and distributed/export-resnet18 (tests/CMakeLists.txt).
# usage: export-once.sh SCRIPT OUT LAST [OTHER...]   (file names relative to OUT)
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: export-once.sh SCRIPT OUT LAST [OTHER...]" >&2
  exit 2
fi
script=$1 out=$2 last=$3
shift 3
mkdir -p "$out"
exec 9>"$out/.$(basename "$script").lock"
flock 9
complete=true
[ -f "$out/$last" ] && [ "$out/$last" -nt "$script" ] || complete=false
for file in "$@"; do
  [ -f "$out/$file" ] || complete=false
done
if $complete; then
  exit 0
fi
"${PYTHON:-/usr/bin/python3}" "$script" "$out"
