// fuse and the fusion analysis: each rule fires where it should (MLP, conv epilogue with a
// residual, softmax, layernorm, GELU after a matmul, movement folded into indexing, weight
// permutes folded into the GEMM), each refuses where it must (two contractions, a reduction over
// another axis, a cycle through an opaque op, broadcast recomputation, limits), every fused graph
// verifies, stays acyclic and computes what it did (the evaluator runs kernel bodies), and the
// kernel counts of realistic blocks are those worked out by hand in each test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/GraphAlgorithms.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/decompose/Decompose.h"
#include "passes/fusion/Fuse.h"
#include "passes/fusion/FusionAnalysis.h"
#include "tests/passes/PassTestUtil.h"

namespace kiln {
namespace {

using passes::FusionRole;
using passes::FusionRule;
using passes::UnfusedReason;

/// The graph as given, decomposed (what the analysis sees) and fused.
struct FuseRun {
  std::unique_ptr<ir::Graph> before, decomposed, after;
  passes::FusionAnalysis analysis; // of `decomposed`
  passes::PassContext context;
  bool changed = false;

  int64_t stat(const std::string &name) const { return context.stats.get(name); }
  std::vector<const ir::Node *> kernels() const {
    std::vector<const ir::Node *> out;
    for (const ir::Node *node : after->nodes())
      if (node->op() == ir::OpKind::Kernel)
        out.push_back(node);
    return out;
  }
  /// The analysed node whose first result is printed as %name.
  const ir::Node *node(const std::string &name) const {
    for (const auto &[value, printed] : ir::printedValueNames(*decomposed))
      if (printed == name && value->producer())
        return value->producer();
    ADD_FAILURE() << "no value %" << name;
    return nullptr;
  }
  /// The index of the group holding `node` (not as a view), or -1.
  int groupOf(const ir::Node *node) const {
    for (size_t g = 0; g < analysis.groups.size(); ++g)
      for (const passes::FusedOp &op : analysis.groups[g].ops)
        if (op.node == node && op.role != FusionRole::SourceView && op.role != FusionRole::OperandView)
          return static_cast<int>(g);
    return -1;
  }
  int groupOf(const std::string &name) const { return groupOf(node(name)); }
  const passes::UnfusedEdge *unfused(const std::string &producer, const std::string &consumer) const {
    for (const passes::UnfusedEdge &edge : analysis.unfused)
      if (edge.producer == node(producer) && edge.consumer == node(consumer))
        return &edge;
    return nullptr;
  }
};

void checkFused(FuseRun &run, bool numerics) {
  EXPECT_NO_THROW(ir::verify(*run.after));
  EXPECT_FALSE(ir::DependenceGraph(*run.after).hasCycle());
  if (numerics)
    test::expectSameNumerics(*run.before, *run.after);
}

FuseRun fuseGraph(std::unique_ptr<ir::Graph> graph, bool numerics = true, const passes::FusionOptions &options = {}) {
  FuseRun run;
  run.before = std::move(graph);
  run.decomposed = run.before->clone();
  passes::PassContext scratch;
  passes::createDecomposePass()->run(*run.decomposed, scratch);
  run.analysis = passes::analyzeFusion(*run.decomposed, options);
  run.after = run.decomposed->clone();
  run.changed = passes::createFusePass()->run(*run.after, run.context);
  checkFused(run, numerics);
  return run;
}

FuseRun fuse(std::string_view text, const passes::FusionOptions &options = {}) {
  return fuseGraph(test::parseKir(text), true, options);
}

/// The body's ops, sorted by name: what a kernel computes, independent of order.
std::vector<std::string> bodyOps(const ir::Node *kernel) {
  std::vector<std::string> ops;
  for (const ir::Node *node : kernel->body()->nodes())
    if (node->op() != ir::OpKind::Constant)
      ops.emplace_back(node->opName());
  std::sort(ops.begin(), ops.end());
  return ops;
}

using Ops = std::vector<std::string>;

// ---- rule 2: contraction epilogues --------------------------------------------------------

TEST(Fusion, MlpLayerIsOneKernelWithItsWeightPermuteBiasAndRelu) {
  FuseRun run = fuse(R"(graph @mlp(%x: f32[4,8]) -> (f32[4,3]) {
    %w1 = param "fc1.weight" : f32[6,8]
    %b1 = param "fc1.bias" : f32[6]
    %w2 = param "fc2.weight" : f32[3,6]
    %h = linear(%x, %w1, %b1) : f32[4,6]
    %a = relu(%h) : f32[4,6]
    %y = linear(%a, %w2) : f32[4,3]
    return %y
  })");
  ASSERT_EQ(run.kernels().size(), 2u);
  EXPECT_EQ(bodyOps(run.kernels()[0]), (Ops{"add", "matmul", "permute", "relu"}));
  EXPECT_EQ(run.kernels()[0]->attrString("rule"), "contraction+epilogue");
  EXPECT_EQ(bodyOps(run.kernels()[1]), (Ops{"matmul", "permute"}));
  EXPECT_TRUE(run.changed);
  EXPECT_EQ(run.stat("groups formed"), 2);
  EXPECT_EQ(run.stat("ops fused"), 6);
  EXPECT_EQ(run.stat("kernels"), 2);
  // The weight permute joined as an operand view; the second layer's input is a computed value.
  const passes::FusionGroup &first = run.analysis.groups[0];
  EXPECT_EQ(first.rule, FusionRule::Contraction);
  EXPECT_EQ(first.anchor->op(), ir::OpKind::MatMul);
  EXPECT_EQ(first.ops[0].role, FusionRole::OperandView);
  const passes::UnfusedEdge *edge = run.unfused("a", "y");
  ASSERT_NE(edge, nullptr);
  EXPECT_EQ(edge->reason, UnfusedReason::ContractionOperand);
}

TEST(Fusion, ConvBiasReluResidualAddReluIsOneKernel) {
  FuseRun run = fuse(R"(graph @block(%x: f32[1,3,5,5]) -> (f32[1,3,5,5]) {
    %w = param "conv.weight" : f32[3,3,3,3]
    %bias = param "conv.bias" : f32[3]
    %c = conv(%x, %w) {pads = [1, 1, 1, 1], strides = [1, 1], dilations = [1, 1]} : f32[1,3,5,5]
    %b = reshape(%bias) {shape = [3, 1, 1]} : f32[3,1,1]
    %cb = add(%c, %b) : f32[1,3,5,5]
    %r = relu(%cb) : f32[1,3,5,5]
    %s = add(%r, %x) : f32[1,3,5,5]
    %y = relu(%s) : f32[1,3,5,5]
    return %y
  })");
  ASSERT_EQ(run.kernels().size(), 1u);
  EXPECT_EQ(bodyOps(run.kernels()[0]), (Ops{"add", "add", "conv", "relu", "relu", "reshape"}));
  EXPECT_EQ(run.stat("kernels"), 1);
}

TEST(Fusion, GeluAfterMatmulIsInTheMatmulsEpilogue) {
  FuseRun run = fuse(R"(graph @ffn(%x: f32[4,8]) -> (f32[4,6]) {
    %w = param "w" : f32[6,8]
    %b = param "b" : f32[6]
    %h = linear(%x, %w, %b) : f32[4,6]
    %g = gelu(%h) : f32[4,6]
    return %g
  })");
  ASSERT_EQ(run.kernels().size(), 1u);
  Ops ops = bodyOps(run.kernels()[0]);
  EXPECT_NE(std::find(ops.begin(), ops.end(), "erf"), ops.end());
  EXPECT_NE(std::find(ops.begin(), ops.end(), "matmul"), ops.end());
  for (const passes::FusedOp &op : run.analysis.groups[0].ops) {
    if (op.node->op() == ir::OpKind::Erf) {
      EXPECT_EQ(op.role, FusionRole::Epilogue);
    }
  }
}

TEST(Fusion, TwoMatmulsNeverShareAKernel) {
  FuseRun run = fuse(R"(graph @g(%x: f32[4,4], %w1: f32[4,4], %w2: f32[4,4]) -> (f32[4,4], f32[4,4]) {
    %m1 = matmul(%x, %w1) : f32[4,4]
    %m2 = matmul(%m1, %w2) : f32[4,4]
    %m3 = matmul(%x, %w2) : f32[4,4]
    %s = add(%m1, %m3) : f32[4,4]
    return %m2, %s
  })");
  for (const ir::Node *kernel : run.kernels()) {
    Ops ops = bodyOps(kernel);
    EXPECT_LE(std::count(ops.begin(), ops.end(), "matmul"), 1) << ir::printGraph(*run.after);
  }
  // The add is the epilogue of one matmul; the other edge into it is refused.
  EXPECT_GE(run.groupOf("s"), 0);
  const passes::UnfusedEdge *edge = run.unfused("m3", "s");
  ASSERT_NE(edge, nullptr);
  EXPECT_EQ(edge->reason, UnfusedReason::TwoContractions);
  ASSERT_NE(run.unfused("m1", "m2"), nullptr);
  EXPECT_EQ(run.unfused("m1", "m2")->reason, UnfusedReason::ContractionOperand);
}

TEST(Fusion, ContractionNeitherTakesAComputedOperandNorAReduction) {
  FuseRun run = fuse(R"(graph @g(%x: f32[4,4], %w: f32[4,4]) -> (f32[4,1]) {
    %e = exp(%x) : f32[4,4]
    %m = matmul(%e, %w) : f32[4,4]
    %r = reduce_sum(%m) {axes = [1], keepdims = 1} : f32[4,1]
    return %r
  })");
  EXPECT_TRUE(run.kernels().empty());
  EXPECT_EQ(run.unfused("e", "m")->reason, UnfusedReason::ContractionOperand);
  EXPECT_EQ(run.unfused("m", "r")->reason, UnfusedReason::ContractionReduction);
}

TEST(Fusion, EpilogueMustHaveTheContractionsOutputShape) {
  FuseRun run = fuse(R"(graph @g(%x: f32[4,4], %w: f32[4,4], %big: f32[2,4,4]) -> (f32[2,4,4]) {
    %m = matmul(%x, %w) : f32[4,4]
    %s = add(%big, %m) : f32[2,4,4]
    return %s
  })");
  EXPECT_TRUE(run.kernels().empty());
  EXPECT_EQ(run.unfused("m", "s")->reason, UnfusedReason::NotAnEpilogue);
}

// ---- rule 3: reductions -------------------------------------------------------------------

TEST(Fusion, SoftmaxIsOneRowKernel) {
  FuseRun run = fuse(R"(graph @g(%x: f32[3,5]) -> (f32[3,5]) {
    %y = softmax(%x) {axis = -1} : f32[3,5]
    return %y
  })");
  ASSERT_EQ(run.kernels().size(), 1u);
  EXPECT_EQ(bodyOps(run.kernels()[0]), (Ops{"div", "exp", "reduce_max", "reduce_sum", "sub"}));
  EXPECT_EQ(run.kernels()[0]->attrString("rule"), "reduction");
  EXPECT_EQ(run.analysis.groups[0].domain, (Shape{3, 5}));
}

TEST(Fusion, LayerNormIsOneRowKernelWithAPrologue) {
  FuseRun run = fuse(R"(graph @g(%x: f32[2,3,8], %r: f32[2,3,8]) -> (f32[2,3,8]) {
    %gamma = param "ln.weight" : f32[8]
    %beta = param "ln.bias" : f32[8]
    %s = add(%x, %r) : f32[2,3,8]
    %y = layer_norm(%s, %gamma, %beta) {axis = -1} : f32[2,3,8]
    return %y
  })");
  ASSERT_EQ(run.kernels().size(), 1u);
  // Every primitive of the decomposition, and the residual add as the reductions' prologue.
  size_t primitives = 0;
  for (const ir::Node *node : run.decomposed->nodes())
    primitives += ir::opTraits(node->op()).tier == ir::OpTier::Primitive;
  EXPECT_EQ(bodyOps(run.kernels()[0]).size(), primitives);
  EXPECT_EQ(run.stat("kernels"), 1);
  bool sawPrologue = false, sawPerRow = false;
  for (const passes::FusedOp &op : run.analysis.groups[0].ops) {
    sawPrologue = sawPrologue || (op.node == run.node("s") && op.role == FusionRole::Prologue);
    sawPerRow = sawPerRow || (op.node->op() == ir::OpKind::Rsqrt && op.role == FusionRole::RowOutputConsumer);
  }
  EXPECT_TRUE(sawPrologue);
  EXPECT_TRUE(sawPerRow);
}

TEST(Fusion, ReductionOverAnotherAxisStartsItsOwnKernel) {
  FuseRun run = fuse(R"(graph @g(%x: f32[4,8]) -> (f32[1,8]) {
    %s1 = reduce_sum(%x) {axes = [1], keepdims = 1} : f32[4,1]
    %y = sub(%x, %s1) : f32[4,8]
    %s2 = reduce_sum(%y) {axes = [0], keepdims = 1} : f32[1,8]
    return %s2
  })");
  EXPECT_EQ(run.groupOf("s1"), run.groupOf("y"));
  EXPECT_EQ(run.groupOf("s2"), -1);
  const passes::UnfusedEdge *edge = run.unfused("y", "s2");
  ASSERT_NE(edge, nullptr);
  EXPECT_EQ(edge->reason, UnfusedReason::ReductionAxes);
  EXPECT_NE(edge->detail.find("axes [0]"), std::string::npos) << edge->detail;
}

TEST(Fusion, ArgmaxTakesItsElementwiseProducer) {
  FuseRun run = fuse(R"(graph @g(%x: f32[3,4]) -> (i64[3]) {
    %e = exp(%x) : f32[3,4]
    %a = argmax(%e) {axis = -1} : i64[3]
    return %a
  })");
  ASSERT_EQ(run.kernels().size(), 1u);
  EXPECT_EQ(bodyOps(run.kernels()[0]), (Ops{"argmax", "exp"}));
}

// ---- rule 1 and rule 4: elementwise chains and movement -------------------------------------

TEST(Fusion, TransposeFeedingAnElementwiseOpBecomesIndexing) {
  FuseRun run = fuse(R"(graph @g(%x: f32[3,4], %y: f32[4,3]) -> (f32[4,3]) {
    %t = permute(%x) {perm = [1, 0]} : f32[4,3]
    %s = add(%t, %y) : f32[4,3]
    %z = tanh(%s) : f32[4,3]
    return %z
  })");
  ASSERT_EQ(run.kernels().size(), 1u);
  EXPECT_EQ(bodyOps(run.kernels()[0]), (Ops{"add", "permute", "tanh"}));
  EXPECT_EQ(run.kernels()[0]->attrString("rule"), "elementwise");
  EXPECT_EQ(run.analysis.groups[0].ops[0].role, FusionRole::IndexExpression);
}

TEST(Fusion, SharedProducerIsComputedOnceAndExported) {
  FuseRun run = fuse(R"(graph @g(%x: f32[2,3]) -> (f32[2,3], f32[2,3]) {
    %a = exp(%x) : f32[2,3]
    %b = neg(%a) : f32[2,3]
    return %a, %b
  })");
  ASSERT_EQ(run.kernels().size(), 1u);
  EXPECT_EQ(run.kernels()[0]->numOutputs(), 2u);
}

TEST(Fusion, SmallerProducerIsNotRecomputedPerBroadcastElement) {
  FuseRun run = fuse(R"(graph @g(%x: f32[4,8], %v: f32[4,1]) -> (f32[4,8]) {
    %e = exp(%v) : f32[4,1]
    %y = add(%x, %e) : f32[4,8]
    return %y
  })");
  EXPECT_TRUE(run.kernels().empty());
  EXPECT_EQ(run.unfused("e", "y")->reason, UnfusedReason::DomainMismatch);
}

TEST(Fusion, MovementNeededInFullStaysACopyKernel) {
  FuseRun run = fuse(R"(graph @g(%x: f32[3,4]) -> (f32[4,3], f32[4,3]) {
    %t = permute(%x) {perm = [1, 0]} : f32[4,3]
    %r = relu(%t) : f32[4,3]
    %c = cumsum(%t) {axis = 0} : f32[4,3]
    return %r, %c
  })");
  EXPECT_TRUE(run.kernels().empty());
  EXPECT_EQ(run.unfused("t", "r")->reason, UnfusedReason::NeededInFull);
  EXPECT_EQ(run.unfused("t", "c")->reason, UnfusedReason::ConsumerOpaque);
  std::string report = passes::formatFusionReport(*run.decomposed, run.analysis);
  EXPECT_NE(report.find("copy kernel"), std::string::npos) << report;
}

TEST(Fusion, MovementChainBeforeAContractionIsOneCopy) {
  FuseRun run = fuse(R"(graph @g(%x: f32[4,6], %w: f32[3,2,4]) -> (f32[3,2,2]) {
    %s = slice(%x) {axes = [1], starts = [0], ends = [4]} : f32[4,4]
    %r = reshape(%s) {shape = [2, 2, 4]} : f32[2,2,4]
    %p = permute(%r) {perm = [1, 0, 2]} : f32[2,2,4]
    %q = reshape(%p) {shape = [4, 4]} : f32[4,4]
    %m = matmul(%q, %x) : f32[4,6]
    %v = reshape(%m) {shape = [24]} : f32[24]
    %o = slice(%v) {axes = [0], starts = [0], ends = [12]} : f32[12]
    %y = reshape(%o) {shape = [3, 2, 2]} : f32[3,2,2]
    return %y
  })");
  // The chain up to the permute is one copy; the reshape after it, read only by the matmul,
  // is a free view of that copy folded into the GEMM's operand.
  ASSERT_GE(run.groupOf("p"), 0);
  EXPECT_EQ(run.groupOf("s"), run.groupOf("p"));
  EXPECT_EQ(run.analysis.groups[run.groupOf("p")].rule, FusionRule::Movement);
  EXPECT_EQ(run.groupOf("q"), -1);
  ASSERT_NE(run.unfused("p", "q"), nullptr);
  EXPECT_EQ(run.unfused("p", "q")->reason, UnfusedReason::ContractionOperand);
}

// A gradient's A^T * g: the transpose of a computed value read only by a matmul folds into
// the GEMM's operand (trans_a) instead of running as a copy kernel.
TEST(Fusion, ATransposeReadOnlyByAMatMulIsAnOperandView) {
  FuseRun run = fuse(R"(graph @g(%x: f32[8,6], %g: f32[8,5]) -> (f32[6,5], f32[6,8]) {
    %a = relu(%x) : f32[8,6]
    %t = permute(%a) {perm = [1, 0]} : f32[6,8]
    %m = matmul(%t, %g) : f32[6,5]
    %u = permute(%a) {perm = [1, 0]} : f32[6,8]
    %e = exp(%u) : f32[6,8]
    return %m, %e
  })");
  ASSERT_GE(run.groupOf("m"), 0);
  EXPECT_EQ(run.groupOf("t"), -1);
  bool viewInGemm = false;
  for (const passes::FusedOp &op : run.analysis.groups[run.groupOf("m")].ops)
    viewInGemm = viewInGemm || (op.node == run.node("t") && op.role == FusionRole::OperandView);
  EXPECT_TRUE(viewInGemm);
  // Two kernels: relu with exp over its transpose (relu's result stored for the GEMM), and the
  // GEMM reading that result transposed. No copy.
  EXPECT_EQ(run.kernels().size(), 2u);
  // A permute that an elementwise op reads is not a view of a computed value: it is indexing
  // in that op's group.
  EXPECT_EQ(run.groupOf("u"), run.groupOf("e"));
}

TEST(Fusion, AReshapeStandingAloneIsReportedAsAFreeView) {
  FuseRun run = fuse(R"(graph @g(%x: f32[2,6]) -> (f32[12]) {
    %e = exp(%x) : f32[2,6]
    %c = cumsum(%e) {axis = 1} : f32[2,6]
    %v = reshape(%c) {shape = [12]} : f32[12]
    return %v
  })");
  EXPECT_TRUE(run.kernels().empty());
  std::string report = passes::formatFusionReport(*run.decomposed, run.analysis);
  EXPECT_NE(report.find("free view"), std::string::npos) << report;
  EXPECT_NE(report.find("producer is opaque"), std::string::npos) << report;
}

TEST(Fusion, ABiasViewSharedByTwoConvsIsCopiedIntoBoth) {
  FuseRun run = fuse(R"(graph @g(%x: f32[1,2,4,4]) -> (f32[1,2,4,4]) {
    %w1 = param "w1" : f32[2,2,1,1]
    %w2 = param "w2" : f32[2,2,1,1]
    %bias = param "bias" : f32[2]
    %b = reshape(%bias) {shape = [2, 1, 1]} : f32[2,1,1]
    %c1 = conv(%x, %w1) {pads = [0, 0, 0, 0], strides = [1, 1], dilations = [1, 1]} : f32[1,2,4,4]
    %a1 = add(%c1, %b) : f32[1,2,4,4]
    %c2 = conv(%a1, %w2) {pads = [0, 0, 0, 0], strides = [1, 1], dilations = [1, 1]} : f32[1,2,4,4]
    %a2 = add(%c2, %b) : f32[1,2,4,4]
    return %a2
  })");
  ASSERT_EQ(run.kernels().size(), 2u);
  for (const ir::Node *kernel : run.kernels())
    EXPECT_EQ(bodyOps(kernel), (Ops{"add", "conv", "reshape"}));
  EXPECT_EQ(run.stat("kernels"), 2); // the original reshape is gone
}

// ---- rules 5 and 6: cycles and limits -------------------------------------------------------

TEST(Fusion, NeverMergesAcrossAPathThroughAnOpaqueOp) {
  // a -> b and a -> c -> b with c opaque: one kernel for a and b would both feed c and wait on it.
  FuseRun run = fuse(R"(graph @g(%x: f32[2,5]) -> (f32[2,5]) {
    %a = exp(%x) : f32[2,5]
    %c = cumsum(%a) {axis = 1} : f32[2,5]
    %b = add(%a, %c) : f32[2,5]
    return %b
  })");
  EXPECT_TRUE(run.kernels().empty());
  const passes::UnfusedEdge *edge = run.unfused("a", "b");
  ASSERT_NE(edge, nullptr);
  EXPECT_EQ(edge->reason, UnfusedReason::Cycle);
  EXPECT_NE(edge->detail.find("%c (cumsum)"), std::string::npos) << edge->detail;
}

TEST(Fusion, NeverMergesAcrossAPathThroughAKernelStraddlingTheCut) {
  // {%r0, %v, %m} forms first (a reduction with a row consumer) and spans the list past %q;
  // merging %s into {%t, %q} would then close the cycle {%t,%s,%q} -> %u -> %v in {%r0,%v,%m}
  // -> %s, whose way back starts at %u, after %q: the bounded search missed it and outlining
  // rejected the non-convex group (found by kiln-fuzz-compile, seed 20131's gradient graph).
  FuseRun run = fuse(R"(graph @g(%x: f32[2,4], %y: f32[], %z: f32[2]) -> (f32[2]) {
    %r0 = reduce_sum(%x) {axes = [1]} : f32[2]
    %t = reduce_sum(%z) : f32[]
    %s = reduce_sum(%r0) : f32[]
    %q = div(%s, %t) : f32[]
    %u = div(%y, %t) : f32[]
    %w = mul(%y, %q) : f32[]
    %v = reshape(%u) {shape = [1]} : f32[1]
    %k = reshape(%w) {shape = [1]} : f32[1]
    %m = mul(%v, %r0) : f32[2]
    %o = add(%k, %m) : f32[2]
    return %o
  })");
  EXPECT_GE(run.kernels().size(), 2u);
}

TEST(Fusion, GroupSizeAndOperandLimitsAreNamedReasons) {
  std::string text = "graph @g(%x: f32[3]) -> (f32[3]) {\n  %v0 = exp(%x) : f32[3]\n";
  for (int i = 1; i < 10; ++i)
    text += fmt::format("  %v{} = neg(%v{}) : f32[3]\n", i, i - 1);
  text += "  return %v9\n}\n";
  passes::FusionOptions options;
  options.maxGroupOps = 4;
  FuseRun run = fuse(text, options);
  ASSERT_FALSE(run.analysis.groups.empty());
  for (const passes::FusionGroup &group : run.analysis.groups)
    EXPECT_LE(group.ops.size(), 4u);
  bool limited = false;
  for (const passes::UnfusedEdge &edge : run.analysis.unfused)
    limited = limited || edge.reason == UnfusedReason::GroupSizeLimit;
  EXPECT_TRUE(limited);

  std::string inputs, body = "  %s0 = add(%i0, %i1) : f32[3]\n";
  for (int i = 0; i < 6; ++i)
    inputs += fmt::format("{}%i{}: f32[3]", i ? ", " : "", i);
  for (int i = 1; i < 5; ++i)
    body += fmt::format("  %s{} = add(%s{}, %i{}) : f32[3]\n", i, i - 1, i + 1);
  options = {};
  options.maxGroupOperands = 3;
  FuseRun wide = fuse(fmt::format("graph @g({}) -> (f32[3]) {{\n{}  return %s4\n}}\n", inputs, body), options);
  for (const passes::FusionGroup &group : wide.analysis.groups)
    EXPECT_LE(group.numOperands, 3);
  bool operandLimited = false;
  for (const passes::UnfusedEdge &edge : wide.analysis.unfused)
    operandLimited = operandLimited || edge.reason == UnfusedReason::OperandLimit;
  EXPECT_TRUE(operandLimited);
  EXPECT_THROW(passes::analyzeFusion(*wide.decomposed, {0, 16}), Error);
}

TEST(Fusion, RandomGraphsStayAcyclicAndComputeTheSame) {
  // Random DAGs of every op class (elementwise, movement, row reductions over two different
  // axes, a contraction, an opaque op) on f32[4,4] values: outlining would throw on a group
  // that is not convex, and checkFused verifies, checks for cycles and compares numerics.
  std::mt19937 rng(5);
  using Ints = std::vector<int64_t>;
  int64_t groups = 0, cycles = 0;
  for (int trial = 0; trial < 25; ++trial) {
    auto graph = std::make_unique<ir::Graph>("random");
    ir::Builder b(*graph);
    std::vector<ir::Value *> pool = {graph->addInput({DType::F32, {4, 4}}, "x"),
                                     graph->addInput({DType::F32, {4, 4}}, "y")};
    auto pick = [&] { return pool[rng() % pool.size()]; };
    auto reduce = [&](ir::OpKind op, ir::Value *v, int64_t axis) {
      return b.create(op, {v}, {{"axes", Ints{axis}}, {"keepdims", int64_t{1}}});
    };
    for (int i = 0; i < 24; ++i) {
      ir::Value *a = pick(), *c = pick();
      switch (rng() % 8) {
      case 0: pool.push_back(b.create(ir::OpKind::Tanh, {a})); break;
      case 1: pool.push_back(b.create(ir::OpKind::Add, {a, c})); break;
      case 2: pool.push_back(b.create(ir::OpKind::Mul, {a, c})); break;
      case 3: pool.push_back(b.create(ir::OpKind::MatMul, {a, c})); break;
      case 4: pool.push_back(b.create(ir::OpKind::CumSum, {a}, {{"axis", int64_t{1}}})); break;
      case 5: pool.push_back(b.create(ir::OpKind::Sub, {a, reduce(ir::OpKind::ReduceMax, a, 1)})); break;
      case 6: pool.push_back(b.create(ir::OpKind::Mul, {c, reduce(ir::OpKind::ReduceSum, a, 0)})); break;
      case 7: pool.push_back(b.create(ir::OpKind::Permute, {a}, {{"perm", Ints{1, 0}}})); break;
      }
    }
    graph->setOutputs({pool.back(), pool[pool.size() - 2], pool[2 + rng() % 12]});
    SCOPED_TRACE(ir::printGraph(*graph));
    FuseRun run = fuseGraph(std::move(graph));
    int64_t launched = 0;
    for (const ir::Node *node : run.after->nodes())
      launched += ir::opTraits(node->op()).tier != ir::OpTier::Source;
    EXPECT_EQ(run.stat("kernels"), launched);
    for (const ir::Node *kernel : run.kernels()) {
      Ops ops = bodyOps(kernel);
      EXPECT_GE(ops.size(), 2u);
      EXPECT_LE(std::count(ops.begin(), ops.end(), "matmul"), 1);
      EXPECT_EQ(std::count(ops.begin(), ops.end(), "cumsum"), 0);
    }
    groups += run.stat("groups formed");
    for (const passes::UnfusedEdge &edge : run.analysis.unfused)
      cycles += edge.reason == UnfusedReason::Cycle;
  }
  // With this seed: 91 groups, 10 edges refused for a cycle; the test must keep exercising both.
  EXPECT_GT(groups, 25);
  EXPECT_GT(cycles, 0);
}

// ---- odd inputs ---------------------------------------------------------------------------

TEST(Fusion, CompositesAndKernelsAreOpaqueAndFusingTwiceChangesNothing) {
  auto graph = test::parseKir(R"(graph @g(%x: f32[2,4]) -> (f32[2,4]) {
    %e = exp(%x) : f32[2,4]
    %s = softmax(%e) {axis = -1} : f32[2,4]
    %n = neg(%s) : f32[2,4]
    %r = relu(%n) : f32[2,4]
    return %r
  })");
  passes::FusionAnalysis analysis = passes::analyzeFusion(*graph);
  ASSERT_EQ(analysis.groups.size(), 1u); // neg + relu; softmax is not decomposed here
  EXPECT_EQ(analysis.singles.size(), 2u);
  passes::PassContext context;
  auto fused = graph->clone();
  EXPECT_TRUE(passes::createFusePass()->run(*fused, context));
  EXPECT_NO_THROW(ir::verify(*fused));
  std::string once = ir::printGraph(*fused);
  EXPECT_FALSE(passes::createFusePass()->run(*fused, context));
  EXPECT_EQ(ir::printGraph(*fused), once);
  test::expectSameNumerics(*graph, *fused);
}

TEST(Fusion, EmptyScalarIntegerAndBoolGraphsFuse) {
  FuseRun run = fuse(R"(graph @g(%e: f32[0,4], %s: f32[], %i: i32[3], %m: bool[3]) -> (f32[0,4], f32[], i32[3]) {
    %e1 = exp(%e) : f32[0,4]
    %e2 = neg(%e1) : f32[0,4]
    %s1 = tanh(%s) : f32[]
    %s2 = abs(%s1) : f32[]
    %i1 = abs(%i) : i32[3]
    %i2 = neg(%i) : i32[3]
    %w = where(%m, %i1, %i2) : i32[3]
    return %e2, %s2, %w
  })");
  EXPECT_EQ(run.kernels().size(), 3u);
}

TEST(Fusion, ADeadChainIsLeftAlone) {
  FuseRun run = fuse(R"(graph @g(%x: f32[3]) -> (f32[3]) {
    %dead = exp(%x) : f32[3]
    %dead2 = neg(%dead) : f32[3]
    %y = relu(%x) : f32[3]
    return %y
  })");
  EXPECT_TRUE(run.kernels().empty());
  EXPECT_EQ(run.stat("groups formed"), 0);
}

TEST(Fusion, ReportNamesKernelsRolesSinglesAndReasons) {
  FuseRun run = fuse(R"(graph @mlp(%x: f32[4,8]) -> (f32[4,3]) {
    %w1 = param "fc1.weight" : f32[6,8]
    %w2 = param "fc2.weight" : f32[3,6]
    %h = linear(%x, %w1) : f32[4,6]
    %a = relu(%h) : f32[4,6]
    %p = cumsum(%a) {axis = 1} : f32[4,6]
    %y = linear(%p, %w2) : f32[4,3]
    return %y
  })");
  std::string report = passes::formatFusionReport(*run.decomposed, run.analysis);
  for (const char *expected : {"fusion of @mlp: 6 ops -> 3 kernels", "kernel 1: contraction+epilogue over [4,6]",
                               "operand view (rule 2)", "epilogue (rule 2)", "[result]", "single ops", "cumsum",
                               "consumer is opaque", "producer is opaque", "reasons:"})
    EXPECT_NE(report.find(expected), std::string::npos) << "missing '" << expected << "' in\n" << report;
  const auto *stored = run.context.analysis<passes::FusionReport>("fusion");
  ASSERT_NE(stored, nullptr);
  EXPECT_EQ(stored->text, report);
}

// ---- realistic blocks: counts worked out by hand ------------------------------------------

TEST(Fusion, ResNetBasicBlocksAreOneKernelPerConv) {
  // Block 1: conv-bias-relu | conv-bias-add(x)-relu: 2 kernels. Block 2 (stride 2, 1x1
  // downsample conv on the shortcut): 3 kernels, the residual add joining the main conv.
  FuseRun run = fuse(R"(graph @resnet(%x: f32[1,4,6,6]) -> (f32[1,8,3,3]) {
    %w1 = param "w1" : f32[4,4,3,3]
    %w2 = param "w2" : f32[4,4,3,3]
    %w3 = param "w3" : f32[8,4,3,3]
    %w4 = param "w4" : f32[8,8,3,3]
    %wd = param "wd" : f32[8,4,1,1]
    %b4 = param "b4" : f32[4]
    %b8 = param "b8" : f32[8]
    %r4 = reshape(%b4) {shape = [4, 1, 1]} : f32[4,1,1]
    %r8 = reshape(%b8) {shape = [8, 1, 1]} : f32[8,1,1]
    %c1 = conv(%x, %w1) {pads = [1, 1, 1, 1], strides = [1, 1], dilations = [1, 1]} : f32[1,4,6,6]
    %a1 = add(%c1, %r4) : f32[1,4,6,6]
    %h1 = relu(%a1) : f32[1,4,6,6]
    %c2 = conv(%h1, %w2) {pads = [1, 1, 1, 1], strides = [1, 1], dilations = [1, 1]} : f32[1,4,6,6]
    %a2 = add(%c2, %r4) : f32[1,4,6,6]
    %s2 = add(%a2, %x) : f32[1,4,6,6]
    %h2 = relu(%s2) : f32[1,4,6,6]
    %c3 = conv(%h2, %w3) {pads = [1, 1, 1, 1], strides = [2, 2], dilations = [1, 1]} : f32[1,8,3,3]
    %a3 = add(%c3, %r8) : f32[1,8,3,3]
    %h3 = relu(%a3) : f32[1,8,3,3]
    %c4 = conv(%h3, %w4) {pads = [1, 1, 1, 1], strides = [1, 1], dilations = [1, 1]} : f32[1,8,3,3]
    %a4 = add(%c4, %r8) : f32[1,8,3,3]
    %cd = conv(%h2, %wd) {pads = [0, 0, 0, 0], strides = [2, 2], dilations = [1, 1]} : f32[1,8,3,3]
    %ad = add(%cd, %r8) : f32[1,8,3,3]
    %s4 = add(%a4, %ad) : f32[1,8,3,3]
    %h4 = relu(%s4) : f32[1,8,3,3]
    return %h4
  })");
  EXPECT_EQ(run.stat("kernels"), 5);
  EXPECT_EQ(run.kernels().size(), 5u);
  EXPECT_EQ(run.groupOf("s2"), run.groupOf("c2"));
  EXPECT_EQ(run.groupOf("h4"), run.groupOf("c4"));
}

/// A post-norm transformer encoder layer (BERT's) on x: [seq, hidden], built from composites.
std::unique_ptr<ir::Graph> encoderLayer(int64_t seq, int64_t hidden, int64_t heads, int64_t ffn) {
  auto graph = std::make_unique<ir::Graph>("encoder");
  ir::Builder b(*graph);
  TensorType act{DType::F32, {seq, hidden}};
  ir::Value *x = graph->addInput(act, "x");
  auto param = [&](const std::string &name, Shape shape) { return b.param(name, {DType::F32, std::move(shape)}); };
  auto linear = [&](ir::Value *in, const std::string &name, int64_t out) {
    return b.create(ir::OpKind::Linear,
                    {in, param(name + ".weight", {out, in->shape().back()}), param(name + ".bias", {out})});
  };
  auto split = [&](ir::Value *v, std::vector<int64_t> perm) {
    ir::Value *r = b.create(ir::OpKind::Reshape, {v}, {{"shape", Shape{seq, heads, hidden / heads}}});
    return b.create(ir::OpKind::Permute, {r}, {{"perm", std::move(perm)}});
  };
  auto layerNorm = [&](ir::Value *v, const std::string &name) {
    return b.create(ir::OpKind::LayerNorm, {v, param(name + ".weight", {hidden}), param(name + ".bias", {hidden})});
  };
  ir::Value *q = split(linear(x, "q", hidden), {1, 0, 2});
  ir::Value *k = split(linear(x, "k", hidden), {1, 2, 0});
  ir::Value *v = split(linear(x, "v", hidden), {1, 0, 2});
  ir::Value *scores = b.create(ir::OpKind::MatMul, {q, k});
  scores = b.create(ir::OpKind::Mul, {scores, b.scalar(DType::F32, 1.0 / std::sqrt(double(hidden / heads)))});
  ir::Value *probs = b.create(ir::OpKind::Softmax, {scores}, {{"axis", int64_t{-1}}});
  ir::Value *context = b.create(ir::OpKind::MatMul, {probs, v});
  context = b.create(ir::OpKind::Permute, {context}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  context = b.create(ir::OpKind::Reshape, {context}, {{"shape", Shape{seq, hidden}}});
  ir::Value *h1 = layerNorm(b.create(ir::OpKind::Add, {x, linear(context, "out", hidden)}), "ln1");
  ir::Value *ff = linear(b.create(ir::OpKind::Gelu, {linear(h1, "ff1", ffn)}), "ff2", hidden);
  graph->addOutput(layerNorm(b.create(ir::OpKind::Add, {h1, ff}), "ln2"));
  return graph;
}

// q, k, v linear (3) + their reshape-permute copies (3) + scores matmul with the scale as epilogue
// (1) + softmax (1) + context matmul (1) + its permute-reshape copy (1) + out linear with the
// residual add (1) + layernorm (1) + ff1 with gelu (1) + ff2 with the residual add (1) +
// layernorm (1) = 15 kernels.
constexpr int64_t kEncoderKernels = 15;

TEST(Fusion, EncoderLayerNumericsAtSmallSize) {
  FuseRun run = fuseGraph(encoderLayer(6, 8, 2, 16));
  EXPECT_EQ(run.stat("kernels"), kEncoderKernels);
}

TEST(Fusion, EncoderLayerAtBertMiniSize) {
  FuseRun run = fuseGraph(encoderLayer(128, 256, 4, 1024), /*numerics=*/false);
  EXPECT_EQ(run.stat("kernels"), kEncoderKernels);
  for (const ir::Node *kernel : run.kernels()) {
    if (kernel->attrString("rule") == "reduction") {
      EXPECT_EQ(kernel->body()->outputs().size(), 1u);
    }
  }
}

TEST(Fusion, SeedMlpIsThreeKernels) {
  // The seed MLP (scripts/export-seeds.sh: mlp_b1024): 1024 -> 512 -> 256 -> 10 with ReLUs,
  // at batch 8 so that the numerics check stays fast.
  FuseRun run = fuse(R"(graph @mlp(%x: f32[8,1024]) -> (f32[8,10]) {
    %w1 = param "fc1.weight" : f32[512,1024]
    %b1 = param "fc1.bias" : f32[512]
    %w2 = param "fc2.weight" : f32[256,512]
    %b2 = param "fc2.bias" : f32[256]
    %w3 = param "fc3.weight" : f32[10,256]
    %b3 = param "fc3.bias" : f32[10]
    %h1 = linear(%x, %w1, %b1) : f32[8,512]
    %a1 = relu(%h1) : f32[8,512]
    %h2 = linear(%a1, %w2, %b2) : f32[8,256]
    %a2 = relu(%h2) : f32[8,256]
    %y = linear(%a2, %w3, %b3) : f32[8,10]
    return %y
  })");
  EXPECT_EQ(run.stat("kernels"), 3);
  EXPECT_EQ(run.stat("ops fused"), 11);
}

} // namespace
} // namespace kiln
