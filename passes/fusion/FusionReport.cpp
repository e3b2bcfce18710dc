// What `kiln-dump --explain-fusion` prints about a fusion analysis (passes/fusion/FusionAnalysis.h):
// the names and reasons of its rules, and the report of groups, single ops and unfused edges,
// each with the rule that put it there or kept it apart.
#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/Printer.h"
#include "passes/fusion/FusionAnalysis.h"
#include "passes/fusion/FusionClasses.h"
#include "passes/memory/ConcatSlices.h"
#include "passes/memory/PlanMemory.h"

namespace kiln::passes {

std::string_view fusionRuleName(FusionRule rule) {
  switch (rule) {
  case FusionRule::Elementwise: return "elementwise";
  case FusionRule::Contraction: return "contraction+epilogue";
  case FusionRule::Reduction: return "reduction";
  case FusionRule::Movement: return "movement";
  }
  return "?";
}

std::string_view unfusedReasonName(UnfusedReason reason) {
  switch (reason) {
  case UnfusedReason::ProducerOpaque: return "producer is opaque";
  case UnfusedReason::ConsumerOpaque: return "consumer is opaque";
  case UnfusedReason::ContractionOperand: return "consumer is a contraction";
  case UnfusedReason::TwoContractions: return "two contractions";
  case UnfusedReason::ContractionReduction: return "reduction after a contraction";
  case UnfusedReason::NotAnEpilogue: return "not an epilogue";
  case UnfusedReason::ReductionAxes: return "reduction over a different axis";
  case UnfusedReason::RowDomain: return "outside the reduction's rows";
  case UnfusedReason::DomainMismatch: return "different iteration domains";
  case UnfusedReason::NeededInFull: return "value is needed in full";
  case UnfusedReason::ConcatInPlace: return "concat laid out in place";
  case UnfusedReason::WidenedBytes: return "bytes widened by their reader";
  case UnfusedReason::Cycle: return "would create a cycle";
  case UnfusedReason::GroupSizeLimit: return "group size limit";
  case UnfusedReason::OperandLimit: return "operand limit";
  }
  return "?";
}

std::string_view unfusedReasonWhy(UnfusedReason reason) {
  switch (reason) {
  case UnfusedReason::ProducerOpaque:
  case UnfusedReason::ConsumerOpaque:
    return "an opaque op (pooling, scatter, top-k, a composite, a kernel) has no per-element form to inline";
  case UnfusedReason::ContractionOperand:
    return "a contraction packs its operands into cache tiles and reads each element many times, so a computed "
           "operand would be recomputed for every tile; only views fold into the packing (of parameters and "
           "constants, and a transpose or reshape of a stored value that only matmuls read)";
  case UnfusedReason::TwoContractions: return "a kernel holds one contraction: one library call, one epilogue";
  case UnfusedReason::ContractionReduction:
    return "a reduction needs whole rows, an epilogue sees one output tile at a time";
  case UnfusedReason::NotAnEpilogue:
    return "an epilogue is elementwise over exactly the contraction's output, applied per output tile; a layout "
           "change or another shape is not";
  case UnfusedReason::ReductionAxes: return "a row kernel reduces one set of axes of one domain";
  case UnfusedReason::RowDomain: return "ops in a row kernel run per element of the rows or once per row";
  case UnfusedReason::DomainMismatch:
    return "an elementwise kernel is one loop over one domain; a smaller producer reached through a broadcast "
           "would be recomputed for every element of the larger";
  case UnfusedReason::NeededInFull:
    return "in a group a movement op is index arithmetic and never stored; another kernel reads this value from "
           "memory, so the op stays a node (a copy, or a free view for a reshape)";
  case UnfusedReason::ConcatInPlace:
    return "memory planning lays the operands of a concat of contiguous slices (every dim before the axis 1) "
           "out inside its buffer, so alone it costs no copy and its readers read one buffer; in a kernel every "
           "element read would select between its operands";
  case UnfusedReason::WidenedBytes:
    return "bytes that another kernel reads from memory anyway are widened by each reader (a quarter of the f32's "
           "traffic): in the producer's kernel the widened value would be stored as well, four times as wide (a QDQ "
           "residual's dequantize_linear)";
  case UnfusedReason::Cycle: return "a kernel runs once all its operands exist: the merged kernel would wait on itself";
  case UnfusedReason::GroupSizeLimit:
  case UnfusedReason::OperandLimit: return "a larger kernel compiles slowly and spills registers for little gain";
  }
  return "?";
}

namespace {

using fusion::classify;
using fusion::OpClass;
using ir::Node;
using ir::OpKind;

std::string_view roleText(FusionRole role, FusionRule rule) {
  switch (role) {
  case FusionRole::Anchor:
    switch (rule) {
    case FusionRule::Contraction: return "anchor: the contraction, one library call over its output";
    case FusionRule::Reduction: return "anchor: reduction, one loop nest over its rows";
    case FusionRule::Elementwise: return "anchor: one loop over its output";
    case FusionRule::Movement: return "anchor: one copy, the index expressions composed";
    }
    return "anchor";
  case FusionRole::Epilogue: return "epilogue (rule 2): on each output tile while in cache";
  case FusionRole::EpilogueInput: return "epilogue operand (rule 2): computed per output element";
  case FusionRole::OperandView: return "operand view (rule 2): folded into the contraction's operand packing";
  case FusionRole::Prologue: return "prologue (rule 3): computed per element as the reduction reads it";
  case FusionRole::RowReduction: return "reduction over the same rows (rule 3)";
  case FusionRole::RowInputConsumer: return "row consumer (rule 3): per element of the rows, after the reduction";
  case FusionRole::RowOutputConsumer: return "row consumer (rule 3): once per row, on the reduced values";
  case FusionRole::ElementwiseInline: return "elementwise (rule 1): computed inline per element";
  case FusionRole::IndexExpression: return "movement (rule 4): index arithmetic, never stored";
  case FusionRole::SourceView:
    return "view of a parameter/constant (rule 4): index arithmetic in each kernel reading it";
  }
  return "?";
}

std::string_view singleText(const ir::Graph &graph, const Node &node) {
  switch (classify(node)) {
  case OpClass::Opaque:
    return ir::isComposite(node.op())    ? "composite: not decomposed, so opaque to fusion"
           : node.op() == OpKind::Kernel ? "a kernel formed earlier"
                                         : "opaque: its own library or standalone kernel";
  case OpClass::Contraction: return "contraction without epilogue: one library call";
  case OpClass::Reduction: return "reduction alone";
  case OpClass::Elementwise: return "elementwise alone";
  case OpClass::Movement:
    if (isFreeView(node))
      return "free view: memory planning aliases it to its operand, no copy runs";
    if (concatStandsAlone(graph, node, PlanOptions{}.alignment))
      return "concat in place: memory planning lays each operand out inside its buffer, no copy runs (unless an "
             "operand already lies in another concat's buffer elsewhere: --print-memory-plan shows which)";
    return "copy kernel: its value is needed in memory";
  case OpClass::Source: break;
  }
  return "source";
}

} // namespace

std::string formatFusionReport(const ir::Graph &graph, const FusionAnalysis &analysis) {
  auto names = ir::printedValueNames(graph);
  auto name = [&](const Node *node) {
    auto it = names.find(node->output(0));
    return "%" + (it == names.end() ? std::string("?") : it->second);
  };
  std::unordered_map<const Node *, std::string> placeOf; // lookup only
  int64_t fusedOps = 0, freeViews = 0, concatsInPlace = 0;
  for (size_t g = 0; g < analysis.groups.size(); ++g)
    for (const FusedOp &op : analysis.groups[g].ops) {
      ++fusedOps;
      if (op.role != FusionRole::SourceView && op.role != FusionRole::OperandView)
        placeOf[op.node] = fmt::format("kernel {}", g + 1);
    }
  for (const Node *node : analysis.singles) {
    placeOf[node] = "single";
    freeViews += isFreeView(*node);
    concatsInPlace += concatStandsAlone(graph, *node, PlanOptions{}.alignment);
  }
  std::string out = fmt::format(
      "fusion of @{}: {} ops -> {} kernels ({} fused groups holding {} ops, {} single ops of which {} free views{})\n"
      "names are those of the graph before fusion\n",
      graph.name(), analysis.numOps, analysis.numKernels(), analysis.groups.size(), fusedOps, analysis.singles.size(),
      freeViews, concatsInPlace > 0 ? fmt::format(" and {} concats in place", concatsInPlace) : "");
  for (size_t g = 0; g < analysis.groups.size(); ++g) {
    const FusionGroup &group = analysis.groups[g];
    std::vector<std::string> results;
    size_t nameWidth = 0, opWidth = 0;
    for (const FusedOp &op : group.ops) {
      if (op.exported)
        results.push_back(name(op.node));
      nameWidth = std::max(nameWidth, name(op.node).size());
      opWidth = std::max(opWidth, op.node->opName().size());
    }
    out += fmt::format("\nkernel {}: {} over {}, anchor {} ({}); {} ops, {} operands, results {}\n", g + 1,
                       fusionRuleName(group.rule), shapeToString(group.domain), name(group.anchor),
                       group.anchor->opName(), group.ops.size(), group.numOperands,
                       results.empty() ? "none (dead: run dce)" : fmt::format("{}", fmt::join(results, ", ")));
    for (const FusedOp &op : group.ops)
      out += fmt::format("  {:<{}}  {:<{}}  {}{}\n", name(op.node), nameWidth, op.node->opName(), opWidth,
                         roleText(op.role, group.rule), op.exported ? " [result]" : "");
  }
  if (!analysis.singles.empty()) {
    out += "\nsingle ops (each its own kernel):\n";
    size_t nameWidth = 0, opWidth = 0;
    for (const Node *node : analysis.singles) {
      nameWidth = std::max(nameWidth, name(node).size());
      opWidth = std::max(opWidth, node->opName().size());
    }
    for (const Node *node : analysis.singles)
      out += fmt::format("  {:<{}}  {:<{}}  {}\n", name(node), nameWidth, node->opName(), opWidth, singleText(graph, *node));
  }
  if (!analysis.unfused.empty()) {
    out += "\nunfused edges (producer [kernel] -> consumer [kernel]: reason: detail):\n";
    std::vector<UnfusedReason> used;
    for (const UnfusedEdge &edge : analysis.unfused) {
      out += fmt::format("  {} [{}] -> {} [{}]: {}: {}\n", name(edge.producer), placeOf[edge.producer],
                         name(edge.consumer), placeOf[edge.consumer], unfusedReasonName(edge.reason), edge.detail);
      if (std::find(used.begin(), used.end(), edge.reason) == used.end())
        used.push_back(edge.reason);
    }
    std::sort(used.begin(), used.end());
    out += "\nreasons:\n";
    for (UnfusedReason reason : used)
      out += fmt::format("  {}: {}\n", unfusedReasonName(reason), unfusedReasonWhy(reason));
  }
  return out;
}

} // namespace kiln::passes
