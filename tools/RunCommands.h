#pragma once
// kiln-run's modes, one function each in its own file; kiln-run.cpp picks one by
// RunOptions::mode. Each returns the exit status and throws kiln::Error for user errors.
#include "tools/RunOptions.h"

namespace kiln::tools {

/// FILE.kir or FILE.onnx: compiled (or --reference) and run; also --bisect-passes
/// (GraphCommand.cpp).
int runGraphCommand(const RunOptions &options);
/// MODEL.so written by kiln-compile: loaded and run with no compiler (ModelCommand.cpp).
int runModelCommand(const RunOptions &options);
/// --onnx-test: ONNX backend conformance folders (ConformanceCommand.cpp).
int runConformanceCommand(const RunOptions &options);

} // namespace kiln::tools
