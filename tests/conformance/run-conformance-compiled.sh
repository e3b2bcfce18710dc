#!/usr/bin/env bash
# The compiled conformance test: every test listed in EXPECTED_PASS (those that pass on the
# reference evaluator) runs compiled through `kiln-run --onnx-test --compiled`; the run fails
# when any of them FAILS compiled. A SKIP (an op or dtype codegen does not support yet) is
# allowed and counted. kiln-run lowers the models into batches that compile as one translation
# unit each, cached in the compile cache ($KILN_CACHE_DIR), so a warm run compiles nothing.
# usage: run-conformance-compiled.sh KILN_RUN SUITE_DIR EXPECTED_PASS [JOBS]
set -euo pipefail
if [ $# -lt 3 ] || [ $# -gt 4 ]; then
  echo "usage: run-conformance-compiled.sh KILN_RUN SUITE_DIR EXPECTED_PASS [JOBS]" >&2
  exit 2
fi
kilnrun=$1 suite=$2 expected=$3 jobs=${4:-2}
here=$(cd "$(dirname "$0")" && pwd)
export LC_ALL=C

start=$(date +%s)
bash "$here/generate.sh" "$suite"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
sed -e '/^#/d' -e '/^$/d' "$expected" | sort -u >"$scratch/expected"
dirs=()
while read -r name; do
  if [ -d "$suite/node/$name" ]; then
    dirs+=("$suite/node/$name")
  else
    echo "MISSING $name: listed in $(basename "$expected") but not in the suite"
  fi
done <"$scratch/expected"
if [ ${#dirs[@]} -eq 0 ]; then
  echo "run-conformance-compiled: no listed test found in $suite/node" >&2
  exit 1
fi

status=0
"$kilnrun" --onnx-test --compiled --jobs "$jobs" "${dirs[@]}" >"$scratch/log" 2>"$scratch/err" || status=$?
# Exit status 1 means "some test failed", judged below; anything else is a failure of the run.
if [ "$status" -gt 1 ] || ! tail -n 1 "$scratch/log" | grep -qE '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$'; then
  echo "run-conformance-compiled: kiln-run exited with status $status; its output:" >&2
  tail -n 20 "$scratch/log" "$scratch/err" >&2
  exit 1
fi
grep '^FAIL ' "$scratch/log" | sed 's/^FAIL /COMPILED-FAIL /' || true
grep '^kiln-run: ' "$scratch/err" || true
skipped=$(grep -c '^SKIP ' "$scratch/log" || true)
if [ "$skipped" -gt 0 ]; then
  echo "skipped compiled, by reason:"
  grep '^SKIP ' "$scratch/log" | sed -E 's/^SKIP [^:]*: //; s/ \(node [^)]*\)$//' | sort | uniq -c | sort -rn
fi
tail -n 1 "$scratch/log"
echo "run-conformance-compiled: ${#dirs[@]} tests that pass on the reference evaluator, $(tail -n 1 "$scratch/log")" \
  "compiled, $(($(date +%s) - start)) s"
[ "$status" -eq 0 ]
