#pragma once
// A graph output that holds the new value of a parameter that is not trained, written back on
// every training step: BatchNorm's running statistics in training mode, a step counter. The
// graph API records these as it builds (frontend/GraphBuilder.h); the training graph
// (passes/autodiff/TrainingGraph.h) turns each into an in-place update. It lives in ir so that
// both can name it without the frontend reaching into passes.
#include <string>

namespace kiln::ir {

struct BufferWrite {
  std::string output; // the forward graph output (by its name, Graph::outputName)
  std::string param;  // the parameter it overwrites
};

} // namespace kiln::ir
