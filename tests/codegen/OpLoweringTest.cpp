// codegen/OpLowering.h's table against what codegen does: every op kind has the lowering its
// tier promises, every Scalar op is spelled for every dtype its inference accepts, every Direct
// op has an emitter, and a graph holding every primitive (tests/golden/roundtrip-all-ops.kir)
// lowers and compiles through the inference pipeline. An op that codegen cannot lower fails
// here, not in a user's compile.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "codegen/EmitDirect.h"
#include "codegen/OpLowering.h"
#include "codegen/ScalarOps.h"
#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Parser.h"
#include "passes/simplify/ConstantFolding.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

using ir::OpKind;

constexpr DType kEveryDType[] = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64,
                                 DType::I32, DType::I8,  DType::U8,  DType::Bool};

std::vector<OpKind> everyOp() {
  std::vector<OpKind> ops;
  for (int i = 0; i < ir::kNumOps; ++i)
    ops.push_back(static_cast<OpKind>(i));
  return ops;
}

TEST(OpLowering, EveryOpHasTheLoweringItsTierPromises) {
  for (OpKind op : everyOp()) {
    SCOPED_TRACE(std::string(ir::opName(op)));
    Lowering lowering = loweringOf(op);
    switch (ir::opTraits(op).tier) {
    case ir::OpTier::Source: EXPECT_EQ(lowering, Lowering::Source); break;
    case ir::OpTier::Composite: EXPECT_EQ(lowering, Lowering::Decomposed); break;
    case ir::OpTier::Primitive:
      EXPECT_NE(lowering, Lowering::Decomposed) << "a primitive must reach codegen";
      EXPECT_NE(lowering, Lowering::Source);
      break;
    }
  }
}

/// `op` on operands of `dtype` (where's condition bool), or nullptr when inference rejects them.
ir::Node *tryNode(ir::Builder &b, OpKind op, DType dtype) {
  std::vector<ir::Value *> inputs;
  int arity = ir::opTraits(op).minInputs;
  for (int i = 0; i < arity; ++i)
    inputs.push_back(b.scalar(op == OpKind::Where && i == 0 ? DType::Bool : dtype, 1.0));
  ir::AttrMap attrs;
  if (op == OpKind::Cast)
    attrs["to"] = DType::F32;
  try {
    return b.create(op, inputs, attrs)->producer();
  } catch (const Error &) {
    return nullptr;
  }
}

TEST(OpLowering, EveryScalarOpIsSpelledForEveryDTypeItAccepts) {
  ir::Graph graph;
  ir::Builder b(graph);
  int scalarOps = 0;
  for (OpKind op : everyOp()) {
    if (loweringOf(op) != Lowering::Scalar)
      continue;
    SCOPED_TRACE(std::string(ir::opName(op)));
    ++scalarOps;
    int spelled = 0;
    for (DType dtype : kEveryDType) {
      ir::Node *node = tryNode(b, op, dtype);
      if (!node)
        continue;
      std::vector<std::string> operands;
      for (size_t i = 0; i < node->numInputs(); ++i)
        operands.push_back("v" + std::to_string(i));
      EXPECT_NO_THROW(EXPECT_FALSE(scalarExpression(*node, operands).empty())) << dtypeName(dtype);
      ++spelled;
    }
    EXPECT_GT(spelled, 0) << "no dtype is accepted";
  }
  EXPECT_GE(scalarOps, 48); // 28 unary and 16 binary rows, mod, where, cast, clip
}

TEST(OpLowering, EveryDirectOpHasAnEmitter) {
  for (OpKind op : everyOp())
    EXPECT_EQ(loweringOf(op) == Lowering::Direct, direct::emitterOf(op) != nullptr) << ir::opName(op);
}

/// Every op kind in `graph`, kernel bodies included.
void collectOps(const ir::Graph &graph, std::set<OpKind> &ops) {
  for (const ir::Node *node : graph.nodes()) {
    ops.insert(node->op());
    if (node->body())
      collectOps(*node->body(), ops);
  }
}

TEST(OpLowering, AGraphOfEveryPrimitiveLowersAndCompiles) {
  std::filesystem::path file = std::filesystem::path(KILN_SOURCE_DIR) / "tests" / "golden" / "roundtrip-all-ops.kir";
  std::unique_ptr<ir::Graph> graph = ir::parseGraphFile(file.string());
  // The file's iota and random_uniform are small and fold into constants; these are too large
  // to fold (passes/simplify/ConstantFolding.h), so they reach codegen as computations.
  ir::Builder b(*graph);
  std::vector<int64_t> unfoldable = {passes::kMaxFoldedElements + 1};
  b.create(OpKind::Iota, {}, {{"axis", int64_t{0}}, {"dtype", DType::I32}, {"shape", unfoldable}});
  b.create(OpKind::RandomUniform, {}, {{"dtype", DType::F32}, {"seed", int64_t{7}}, {"shape", unfoldable}});
  // The file's einsum is a matrix product, which einsum-to-matmul turns into matmul; this one
  // (a sum over the second operand alone) reaches codegen as einsum.
  for (ir::Node *node : std::vector<ir::Node *>(graph->nodes().begin(), graph->nodes().end()))
    if (node->op() == OpKind::Einsum) {
      b.create(OpKind::Einsum, {node->input(0), node->input(1)}, {{"equation", std::string("ij,jk->i")}});
      break;
    }
  // Every value is an output, so that no op is dead; every parameter gets a value.
  std::vector<ir::Value *> outputs;
  CompileOptions options = testOptions();
  for (const ir::Node *node : graph->nodes()) {
    for (ir::Value *value : node->outputs())
      outputs.push_back(value);
    if (node->op() == OpKind::Param)
      options.params[node->attrString("name")] = Tensor(node->output()->type());
  }
  graph->setOutputs(outputs);

  LoweredModel lowered = lowerGraph(*graph, options);
  std::set<OpKind> reached;
  collectOps(*lowered.graph, reached);
  for (OpKind op : everyOp()) {
    bool primitive = ir::opTraits(op).tier == ir::OpTier::Primitive;
    if (primitive && op != OpKind::Kernel)
      EXPECT_TRUE(reached.count(op)) << ir::opName(op) << " did not reach codegen: the graph no longer tests it";
    if (!primitive && op != OpKind::Param && op != OpKind::Constant)
      EXPECT_FALSE(reached.count(op)) << ir::opName(op) << " reached codegen undecomposed";
  }
  EXPECT_NO_THROW(compile(*graph, options));
}

} // namespace
} // namespace kiln::codegen::test
