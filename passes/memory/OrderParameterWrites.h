#pragma once
// order-parameter-writes: moves the node writing each parameter's new value
// (passes/memory/ParameterWrites.h), with the nodes between that depend on it, just after the
// last other node reading the parameter, so that writing the value over the parameter in place
// clobbers nothing a later node reads. (buildTrainingGraph puts optimizer updates last already;
// a buffer write, BatchNorm's running statistics, is a forward node that may come before other
// readers of its parameter.)
//   Requires: a verified graph whose node list is the final execution order (after `fuse` and
//   isolate-parameter-writes) and whose outputs that overwrite a parameter are named after it.
//   Guarantees: the graph computes what it did; each parameter's writer comes after every other
//   node reading it. kiln::Error when a reader of the parameter depends on the new value (no
//   order can update that parameter in place). Counter: "nodes moved".
#include <memory>

#include "passes/Pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> createOrderParameterWritesPass();

} // namespace kiln::passes
