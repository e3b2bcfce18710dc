#pragma once
// A picture of the memory plan (passes/memory/PlanMemory.h) as a standalone SVG document: time (the
// kernel steps of passes/memory/Liveness.h) runs across, arena offset runs down, and every buffer is a
// rectangle spanning its live steps and its byte range. Where a plan wastes memory shows as
// white space between rectangles; the dashed line marks the lower bound.
//
// Requires: `plan` made for `graph` as it stands (plan-memory run last). Only the plan's
// figures and the graph's value names are read, never the values the plan points to, so a
// value missing from `graph` is drawn as "%?" rather than read.
// Provides: a deterministic, well-formed XML document (every name XML-escaped, bytes that are
// not UTF-8 replaced by U+FFFD).
#include <string>

#include "ir/Graph.h"
#include "passes/memory/PlanMemory.h"

namespace kiln::passes {

/// Where things go, in pixels. The plot's top-left corner (step 0, offset 0) is at
/// (plotLeft, plotTop); step s spans [plotLeft + s * w, plotLeft + (s + 1) * w) with
/// w = clamp(maxPlotWidth / steps, minStepWidth, maxStepWidth); offset b is at
/// plotTop + b * arenaHeight / arenaBytes.
struct MemoryPlanSvgLayout {
  double plotLeft = 96;
  double plotTop = 72;
  double arenaHeight = 600;   // the whole arena, however large
  double minBufferHeight = 2; // so that small buffers stay visible (and may overlap others)
  double maxPlotWidth = 1200;
  double minStepWidth = 4;
  double maxStepWidth = 48;

  /// The width of one step for a plot of `steps` steps.
  double stepWidth(int64_t steps) const;
};

/// The SVG: a header line (graph name; arena, lower bound and naive bytes; alignment; buffer
/// and step counts), a step ruler across the top and an offset ruler down the left, the arena
/// frame, a dashed lower-bound line, and one `<g class="buffer">` per buffer in plan order (a
/// buffer inside another right after it, drawn over it) with a `<title>` tooltip (its values by
/// printed name, with their original name when that differs, and how each took the buffer
/// over; bytes; offset; steps; for a buffer inside another, which and where), a `<rect>` and,
/// when it fits, a `<text>` label with the value names.
std::string memoryPlanSvg(const ir::Graph &graph, const MemoryPlan &plan, const MemoryPlanSvgLayout &layout = {});

} // namespace kiln::passes
