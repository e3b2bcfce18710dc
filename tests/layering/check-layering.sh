#!/usr/bin/env bash
# The layering test: every `#include "folder/..."` in a library folder must name a folder that
# folder may depend on, and third-party headers stay at the edges. The rules are the table
# below, the same as docs/ARCHITECTURE.md's "Folders and what they may include":
#   core      core only (the bottom layer: dtypes, tensors, allocation, kiln::Error)
#   runtime   core (a compiled model needs no compiler library)
#   ir        core
#   passes    ir, core
#   frontend  ir, core (frontend/onnx included)
#   codegen   passes, ir, runtime, core
#   distributed  runtime, core (data-parallel training over MPI)
#   python    every library (the Python package's bindings), not tools or examples
#   tools, examples, tests: anything but examples/ (a model a tool needs lives in the library)
# Third-party: <boost/...> only in ir/GraphAlgorithms.cpp (Boost.Graph behind one adapter);
# <onnx/...> and <google/protobuf/...> only in frontend/onnx/, tests/onnx/ and tools/quantize/
# (kiln-quantize edits the ModelProto it writes back, untouched where it does not quantise);
# <Eigen/...> only in ir/ops/MatrixProduct.cpp (the reference evaluator's matrix product);
# <pybind11/...> only in python/; <mpi.h> only in distributed/MpiGroup.cpp (MPI behind one file).
#
# Usage: check-layering.sh [ROOT]   (ROOT defaults to the repository). Prints every violation
# as `file:line: folder may not include "header"` and exits 1 if there is any.
set -uo pipefail
root="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$root" || { echo "check-layering: no folder $root" >&2; exit 2; }

declare -A allowed=(
  [core]="core"
  [runtime]="runtime core"
  [ir]="ir core"
  [passes]="passes ir core"
  [frontend]="frontend ir core"
  [codegen]="codegen passes ir runtime core"
  [distributed]="distributed runtime core"
  [python]="python distributed codegen passes ir runtime core frontend"
  [tools]="tools distributed codegen passes ir runtime core frontend"
  [examples]="codegen passes ir runtime core frontend"
  [tests]="tests tools distributed codegen passes ir runtime core frontend"
)

violations=0
report() { echo "$1"; violations=$((violations + 1)); }

for folder in "${!allowed[@]}"; do
  [ -d "$folder" ] || continue
  while IFS= read -r hit; do
    file="${hit%%:*}"; rest="${hit#*:}"; line="${rest%%:*}"; text="${rest#*:}"
    header=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*([<"])([^">]*)[">].*/\1\2/' <<<"$text")
    kind="${header:0:1}"; path="${header:1}"
    if [ "$kind" = '"' ]; then
      top="${path%%/*}"
      [ "$top" = "$path" ] && continue # a header beside the file
      case " ${allowed[$folder]} " in
        *" $top "*) ;;
        *) report "$file:$line: $folder may not include \"$path\"" ;;
      esac
    else
      case "$path" in
        boost/*)
          case "$file" in ir/GraphAlgorithms.cpp) ;; *) report "$file:$line: only ir/GraphAlgorithms.cpp may include <$path>" ;; esac ;;
        onnx/* | google/protobuf/*)
          case "$file" in frontend/onnx/* | tests/onnx/* | tools/quantize/*) ;; *) report "$file:$line: only frontend/onnx/ and tools/quantize/ may include <$path>" ;; esac ;;
        Eigen/* | eigen3/*)
          case "$file" in ir/ops/MatrixProduct.cpp) ;; *) report "$file:$line: only ir/ops/MatrixProduct.cpp may include <$path>" ;; esac ;;
        pybind11/*)
          case "$file" in python/*) ;; *) report "$file:$line: only python/ may include <$path>" ;; esac ;;
        mpi.h | mpi/*)
          case "$file" in distributed/MpiGroup.cpp) ;; *) report "$file:$line: only distributed/MpiGroup.cpp may include <$path>" ;; esac ;;
      esac
    fi
  done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "$folder" \
             --include='*.h' --include='*.cpp' --include='*.def' --include='*.inc' 2>/dev/null)
done

if [ "$violations" -gt 0 ]; then
  echo "check-layering: $violations include(s) break the layering"
  exit 1
fi
echo "check-layering: ok"
