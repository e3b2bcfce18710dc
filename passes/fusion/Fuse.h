#pragma once
// fuse: groups primitives into kernels. Runs the fusion analysis (passes/fusion/FusionAnalysis.h) and
// outlines every group of two or more ops into one `kernel` node (ir::outlineKernel) whose
// `rule` attribute names the rule that formed it; single ops stay plain nodes, each its own
// kernel.
//   Requires: a verified graph, normally after `decompose` and a final dce (a dead group, one
//   whose results nothing uses, is left as it is). Composites and existing kernels stay as
//   they are (opaque to fusion).
//   Guarantees: the graph computes what it did (kernel bodies hold the same ops); every group
//   is convex, so the graph stays acyclic; views of parameters and constants read by several
//   kernels are copied into each, and the originals are removed once unused.
//   Provides: context.analyses["fusion"] holds a passes::FusionReport (the --explain-fusion
//   text). Counters: "groups formed", "ops fused" (ops moved into kernel bodies, view copies
//   included) and "kernels" (nodes other than params and constants left: kernel launches,
//   reshapes that only alias included).
#include <memory>
#include <string>

#include "passes/Pass.h"

namespace kiln::passes {

/// What `fuse` leaves in context.analyses["fusion"]. The analysis itself names nodes that
/// outlining replaces, so the pass keeps its report, written before outlining: values are
/// named as in the graph before fusion.
struct FusionReport {
  std::string text;
};

std::unique_ptr<Pass> createFusePass();

} // namespace kiln::passes
