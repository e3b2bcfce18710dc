#pragma once
// The text form of the IR (.kir). Every graph prints to text that parses back to an equal
// graph (ir/Parser.h); golden tests are written in it.
#include <string>

#include "ir/Graph.h"

namespace kiln::ir {

struct PrintOptions {
  /// Tensors (constant values, parameter initial values) with more elements than this print
  /// as `elided` unless keepLargeTensors is set; such text parses back only for parameters.
  int64_t maxInlineElements = 16;
  bool keepLargeTensors = false;
};

std::string printGraph(const Graph &graph, const PrintOptions &options = {});

} // namespace kiln::ir
