#!/usr/bin/env bash
# The conformance test: generates the ONNX node suite once (cached in SUITE_DIR), runs every
# test through `kiln-run --onnx-test` and fails when a test listed in EXPECTED_PASS does not
# pass (printing why). Tests that pass but are not listed are printed as NEW so that the list
# can be updated: `kiln-run --onnx-test SUITE_DIR/node --list-passing EXPECTED_PASS`.
# usage: run-conformance.sh KILN_RUN SUITE_DIR EXPECTED_PASS
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: run-conformance.sh KILN_RUN SUITE_DIR EXPECTED_PASS" >&2
  exit 2
fi
kilnrun=$1 suite=$2 expected=$3
here=$(cd "$(dirname "$0")" && pwd)
export LC_ALL=C # one sort order for the list, kiln-run's and comm's

start=$(date +%s)
bash "$here/generate.sh" "$suite"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
status=0
"$kilnrun" --onnx-test "$suite/node" --jobs 2 --list-passing "$scratch/passing" >"$scratch/log" 2>&1 || status=$?
# Exit status 1 means "some test failed", which the comparison below judges; anything else
# (a usage error, a crash) is a failure of the run itself.
if [ "$status" -gt 1 ] || [ ! -f "$scratch/passing" ]; then
  echo "run-conformance: kiln-run exited with status $status; its output:" >&2
  tail -n 20 "$scratch/log" >&2
  exit 1
fi

sed -e '/^#/d' -e '/^$/d' "$expected" | sort -u >"$scratch/expected"
comm -23 "$scratch/expected" "$scratch/passing" >"$scratch/lost"
comm -13 "$scratch/expected" "$scratch/passing" >"$scratch/new"
while read -r name; do
  reason=$(grep -m1 -E "^(FAIL|SKIP) $name: " "$scratch/log" || echo "$name: not found in the suite")
  echo "REGRESSION $reason"
done <"$scratch/lost"
while read -r name; do
  echo "NEW $name passes but is not in $(basename "$expected")"
done <"$scratch/new"
tail -n 1 "$scratch/log"
echo "run-conformance: $(wc -l <"$scratch/expected") expected, $(wc -l <"$scratch/lost") regressed," \
  "$(wc -l <"$scratch/new") new, $(($(date +%s) - start)) s"
if [ -s "$scratch/new" ]; then
  echo "run-conformance: update the list with: $kilnrun --onnx-test $suite/node --list-passing $expected"
fi
[ ! -s "$scratch/lost" ]
