#pragma once
// The fusion analysis: which primitives of a graph form one kernel, by which rule, and why
// every producer -> consumer edge left between two kernels was not fused. It is a pure
// function of the graph; the `fuse` pass (passes/fusion/Fuse.h) outlines what it decides, and
// `kiln-dump --explain-fusion` prints formatFusionReport.
//
// Requires: a verified graph, normally after `decompose` (composites, like kernels already
// formed, are treated as opaque: they stay single ops).
// Provides: a partition of the non-source ops into groups. Each group is one future kernel:
// one loop nest over its anchor's iteration domain (the contraction's output, the reduction's
// input rows, or the elementwise output), every other op computed inline per element and
// movement ops turned into index arithmetic. A group never creates a cycle between kernels.
// Views of parameters and constants (a weight permute, a bias reshape) may sit in several
// groups at once: each group recomputes them as indexing, so `fuse` gives each its own copy.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/Graph.h"

namespace kiln::passes {

struct FusionOptions {
  /// Most ops in one group (views of parameters included): a generated kernel past this is
  /// slow to compile and spills registers, for little gain in memory traffic.
  int maxGroupOps = 64;
  /// Most distinct operands of one group: each is a pointer and a set of strides the loop nest
  /// carries; small constants copied into the body do not count.
  int maxGroupOperands = 16;
};

/// The rule that formed a group; also the `rule` attribute of its kernel node, from which
/// codegen picks the lowering.
enum class FusionRule {
  Elementwise, // "elementwise": one loop over the output, producers inlined (rule 1)
  Contraction, // "contraction+epilogue": a library GEMM/conv with an elementwise epilogue (rule 2)
  Reduction,   // "reduction": a row kernel, reductions over the same axes with their producers
               // and consumers (rule 3)
  Movement,    // "movement": a chain of movement ops composed into one copy (rule 4)
};
std::string_view fusionRuleName(FusionRule rule);

/// Why an op is in its group (what the report prints beside it).
enum class FusionRole {
  Anchor,            // defines the group's iteration domain
  Epilogue,          // elementwise on the contraction's output, applied per output tile
  EpilogueInput,     // elementwise, computed per output element as an epilogue's operand
  OperandView,       // a view of a parameter or constant folded into the contraction's packing
  Prologue,          // elementwise on the rows, computed per element as a reduction reads it
  RowReduction,      // a further reduction over the same rows
  RowInputConsumer,  // elementwise over the rows, after a reduction (e.g. x - max)
  RowOutputConsumer, // elementwise on the reduced values, once per row (e.g. rsqrt(var + eps))
  ElementwiseInline, // an elementwise producer computed inline per element
  IndexExpression,   // a movement op turned into index arithmetic
  SourceView,        // a movement op over parameters/constants turned into index arithmetic
};
std::string_view fusionRoleName(FusionRole role);

struct FusedOp {
  const ir::Node *node = nullptr;
  FusionRole role = FusionRole::Anchor;
  /// Some result is used outside the group or returned: the kernel writes it.
  bool exported = false;
};

struct FusionGroup {
  FusionRule rule = FusionRule::Elementwise;
  const ir::Node *anchor = nullptr;
  /// The anchor's iteration domain (contraction output, reduction input, elementwise output).
  Shape domain;
  /// In list order. A SourceView op may also be listed by other groups.
  std::vector<FusedOp> ops;
  /// Distinct values the group reads from outside (small constants copied into the body aside).
  int numOperands = 0;
};

/// Why a producer and its consumer ended up in different kernels.
enum class UnfusedReason {
  ProducerOpaque,       // the producer is opaque (library or standalone kernel, or a composite)
  ConsumerOpaque,       // the consumer is opaque
  ContractionOperand,   // the value is an operand of a contraction, which packs its operands
  TwoContractions,      // both sides hold a contraction
  ContractionReduction, // a contraction and a reduction: a reduction is not an epilogue
  NotAnEpilogue,        // not elementwise over the contraction's output shape (or a layout change)
  ReductionAxes,        // reductions over different axes or different domains
  RowDomain,            // elementwise over neither the reduction's input nor its output domain
  DomainMismatch,       // elementwise ops over domains of different sizes (a broadcast would
                        // recompute the smaller one per element of the larger)
  NeededInFull,         // a movement op whose value is also needed in memory outside the group
  ConcatInPlace,        // a concat whose operands memory planning can lay out in its buffer
                        // (passes/memory/ConcatSlices.h, concatStandsAlone): free alone
  WidenedBytes,         // a cast of u8/i8 bytes to float whose bytes another reader reads from
                        // memory: each reader widens them, the producer stores only bytes
  Cycle,                // merging would create a cycle between kernels
  GroupSizeLimit,       // FusionOptions::maxGroupOps
  OperandLimit,         // FusionOptions::maxGroupOperands
};
/// A short name ("consumer is a contraction") and the sentence saying why the rule exists.
std::string_view unfusedReasonName(UnfusedReason reason);
std::string_view unfusedReasonWhy(UnfusedReason reason);

struct UnfusedEdge {
  const ir::Node *producer = nullptr;
  const ir::Node *consumer = nullptr;
  UnfusedReason reason = UnfusedReason::ProducerOpaque;
  /// The ops and shapes involved ("%3 (relu) is an operand of %4 (matmul)").
  std::string detail;
};

struct FusionAnalysis {
  /// Every group of two or more ops (each becomes a kernel node), in list order of last op.
  std::vector<FusionGroup> groups;
  /// Ops that stay single nodes (each its own kernel), in list order.
  std::vector<const ir::Node *> singles;
  /// Every producer -> consumer edge between different kernels, in list order of consumers.
  std::vector<UnfusedEdge> unfused;
  /// Non-source nodes of the graph.
  int64_t numOps = 0;

  int64_t numKernels() const { return static_cast<int64_t>(groups.size() + singles.size()); }
};

/// Groups the graph's ops by the fusion rules (passes/fusion/FusionRules.cpp explains each).
/// Linear in the graph apart from the cycle checks, each a search bounded by the list span
/// between the two groups, and a final check that the kernels form no cycle (when they do,
/// which a search so bounded can miss, the grouping is redone with unbounded searches).
FusionAnalysis analyzeFusion(const ir::Graph &graph, const FusionOptions &options = {});

/// The --explain-fusion report: a summary line, then each kernel group with its ops and the
/// role that joined each, the single ops and why they stand alone, and every unfused edge with
/// its reason. Values are named as printGraph names them in `graph` (the graph analysed).
std::string formatFusionReport(const ir::Graph &graph, const FusionAnalysis &analysis);

/// A reshape: the same bytes under another shape, so standing alone it costs no kernel when
/// memory planning aliases it (passes/memory/PlanMemory.h, PlanOptions::aliasViews).
bool isFreeView(const ir::Node &node);

} // namespace kiln::passes
