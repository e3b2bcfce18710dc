#!/usr/bin/env bash
# The layering check must fail on a tree that breaks the rules and pass on one that keeps them:
# a fake tree with one violation of each kind (a folder reaching up, examples/ included, a
# third-party header outside its edge) must give exactly those, and the same tree without them
# none.
set -euo pipefail
check="$(dirname "$0")/check-layering.sh"
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree"/{core,ir/ops,runtime,passes,codegen,frontend/onnx,tools,examples,python,distributed}
echo '#include "core/Error.h"' >"$tree/ir/Graph.h"
echo '#include "runtime/Executable.h"' >"$tree/codegen/Ok.cpp"
echo '#include <onnx/onnx_pb.h>' >"$tree/frontend/onnx/Ok.cpp"
echo '#include <boost/graph/adjacency_list.hpp>' >"$tree/ir/GraphAlgorithms.cpp"
echo '#include <Eigen/Core>' >"$tree/ir/ops/MatrixProduct.cpp"
printf '#include <pybind11/pybind11.h>\n#include "codegen/CompileModel.h"\n#include "frontend/onnx/OnnxImporter.h"\n' \
  >"$tree/python/Module.cpp"
printf '#include <mpi.h>\n#include "runtime/Trainer.h"\n' >"$tree/distributed/MpiGroup.cpp"
if ! out=$(bash "$check" "$tree"); then echo "a clean tree failed: $out"; exit 1; fi
echo '#include "ir/Graph.h"' >"$tree/runtime/Bad.cpp"
echo '#include "passes/Pass.h"' >"$tree/frontend/Bad.h"
echo '#include "examples/Model.h"' >"$tree/tools/Bad.cpp"
echo '#include <boost/graph/adjacency_list.hpp>' >"$tree/passes/Bad.cpp"
echo '#include <boost/graph/graphviz.hpp>' >"$tree/ir/Export.cpp"
echo '#include <onnx/onnx_pb.h>' >"$tree/ir/Bad.cpp"
echo '#include <Eigen/Core>' >"$tree/ir/ops/Contraction.cpp"
echo '#include "tools/ToolCommon.h"' >"$tree/python/Bad.cpp"
echo '#include <pybind11/numpy.h>' >"$tree/runtime/Numpy.cpp"
echo '#include <mpi.h>' >"$tree/runtime/Mpi.cpp"
echo '#include "codegen/CompileModel.h"' >"$tree/distributed/Bad.cpp"
if out=$(bash "$check" "$tree"); then echo "a tree with violations passed: $out"; exit 1; fi
for expected in 'runtime/Bad.cpp:1: runtime may not include "ir/Graph.h"' \
                'frontend/Bad.h:1: frontend may not include "passes/Pass.h"' \
                'tools/Bad.cpp:1: tools may not include "examples/Model.h"' \
                'passes/Bad.cpp:1: only ir/GraphAlgorithms.cpp' \
                'ir/Export.cpp:1: only ir/GraphAlgorithms.cpp' \
                'ir/Bad.cpp:1: only frontend/onnx/' \
                'ir/ops/Contraction.cpp:1: only ir/ops/MatrixProduct.cpp' \
                'python/Bad.cpp:1: python may not include "tools/ToolCommon.h"' \
                'runtime/Numpy.cpp:1: only python/' \
                'runtime/Mpi.cpp:1: only distributed/MpiGroup.cpp' \
                'distributed/Bad.cpp:1: distributed may not include "codegen/CompileModel.h"'; do
  grep -qF "$expected" <<<"$out" || { echo "missing: $expected"; echo "$out"; exit 1; }
done
grep -qF '11 include(s) break the layering' <<<"$out" || { echo "wrong count: $out"; exit 1; }
echo "self-test: ok"
