// ONNX activations import as the one kiln op of the same meaning (no decomposition in the
// importer): the graph holds exactly that op, with ONNX's attribute values or defaults, and
// evaluates to the ONNX formula computed here.
#include <algorithm>
#include <cmath>

#include "OnnxTestModel.h"

using namespace kiln;
using namespace kiln::onnxtest;
using ir::OpKind;

namespace {

struct Case {
  const char *onnxOp;
  OpKind kilnOp;
  double (*formula)(double);
};

double softplus(double x) { return std::log1p(std::exp(x)); }

const Case kCases[] = {
    {"Elu", OpKind::Elu, [](double x) { return x < 0 ? 0.5 * std::expm1(x) : x; }},
    {"Selu", OpKind::Selu,
     [](double x) { return 1.05070102214813232421875 * (x > 0 ? x : 1.67326319217681884765625 * std::expm1(x)); }},
    {"LeakyRelu", OpKind::LeakyRelu, [](double x) { return x < 0 ? 0.01 * x : x; }},
    {"HardSigmoid", OpKind::HardSigmoid, [](double x) { return std::clamp(0.5 * x + 0.25, 0.0, 1.0); }},
    {"HardSwish", OpKind::HardSwish, [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); }},
    {"Softplus", OpKind::Softplus, softplus},
    {"Softsign", OpKind::Softsign, [](double x) { return x / (1 + std::fabs(x)); }},
    {"Celu", OpKind::Celu, [](double x) { return std::max(0.0, x) + std::min(0.0, 2 * std::expm1(x / 2)); }},
    {"ThresholdedRelu", OpKind::ThresholdedRelu, [](double x) { return x > 0.5 ? x : 0.0; }},
    {"Mish", OpKind::Mish, [](double x) { return x * std::tanh(softplus(x)); }},
    {"Shrink", OpKind::Shrink, [](double x) { return x < -1 ? x + 0.25 : (x > 1 ? x - 0.25 : 0.0); }},
};

// Non-default attributes where the op has them, so that passing them on is tested too.
void setAttributes(onnx::NodeProto &node) {
  std::string op = node.op_type();
  if (op == "Elu" || op == "ThresholdedRelu")
    setFloat(node, "alpha", 0.5f);
  if (op == "Celu")
    setFloat(node, "alpha", 2.0f);
  if (op == "HardSigmoid") {
    setFloat(node, "alpha", 0.5f);
    setFloat(node, "beta", 0.25f);
  }
  if (op == "Shrink") {
    setFloat(node, "lambd", 1.0f);
    setFloat(node, "bias", 0.25f);
  }
}

TEST(OnnxImportActivation, EachIsOneKilnOpWithItsAttributes) {
  std::vector<double> xs{-4, -1.5, -0.25, 0, 0.75, 3};
  Tensor x = Tensor::fromDoubles(DType::F64, {2, 3}, xs);
  for (const Case &c : kCases) {
    SCOPED_TRACE(c.onnxOp);
    ModelBuilder m(18); // Mish is new in opset 18
    m.input("x", DType::F64, {2, 3});
    setAttributes(m.node(c.onnxOp, {"x"}, {"y"}));
    m.output("y", DType::F64, {2, 3});
    auto graph = import(m);
    ASSERT_EQ(graph->numNodes(), 1u);
    EXPECT_EQ(graph->firstNode()->op(), c.kilnOp);
    Tensor y = ir::evaluate(*graph, {x})[0];
    for (size_t i = 0; i < xs.size(); ++i)
      EXPECT_NEAR(y.getDouble(static_cast<int64_t>(i)), c.formula(xs[i]), 1e-12) << "x = " << xs[i];
  }
}

TEST(OnnxImportActivation, SeluDefaultsAreOnnxsFloat32Constants) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {1});
  m.node("Selu", {"x"}, {"y"});
  m.output("y", DType::F32, {1});
  auto graph = import(m);
  const ir::Node *selu = findOp(*graph, OpKind::Selu);
  ASSERT_NE(selu, nullptr);
  EXPECT_EQ(selu->attrFloat("alpha"), 1.67326319217681884765625);
  EXPECT_EQ(selu->attrFloat("gamma"), 1.05070102214813232421875);
}

TEST(OnnxImportActivation, PReluBroadcastsItsSlopeAndRejectsAMismatch) {
  ModelBuilder m(16);
  m.input("x", DType::F32, {2, 3});
  m.initializer("slope", Tensor::fromDoubles(DType::F32, {3}, {0.5, 2, -1}));
  m.node("PRelu", {"x", "slope"}, {"y"});
  m.output("y", DType::F32, {2, 3});
  Tensor x = Tensor::fromDoubles(DType::F32, {2, 3}, {-2, -2, -2, 1, -1, 0});
  auto graph = import(m);
  EXPECT_EQ(countOps(*graph, OpKind::PRelu), 1);
  expectClose(ir::evaluate(*graph, {x})[0], {-1, -4, 2, 1, -2, 0});

  ModelBuilder bad(16);
  bad.input("x", DType::F32, {2, 3});
  bad.initializer("slope", Tensor::fromDoubles(DType::F32, {2}, {1, 2}));
  bad.node("PRelu", {"x", "slope"}, {"y"}, "prelu");
  bad.output("y", DType::F32, {2, 3});
  expectError([&] { import(bad); }, {"node 'prelu' (PRelu)", "slope [2] does not broadcast"});
}

TEST(OnnxImportActivation, ShrinkOnIntegersAndCeluAlphaZero) {
  ModelBuilder m(13);
  m.input("x", DType::I32, {5});
  auto &shrink = m.node("Shrink", {"x"}, {"y"});
  setFloat(shrink, "lambd", 1.5f);
  setFloat(shrink, "bias", 1.0f);
  m.output("y", DType::I32, {5});
  Tensor y = run(m, {Tensor::fromDoubles(DType::I32, {5}, {-3, -1, 0, 1, 2})})[0];
  EXPECT_EQ(y.dtype(), DType::I32);
  expectClose(y, {-2, 0, 0, 0, 1});

  ModelBuilder celu(13);
  celu.input("x", DType::F32, {2});
  setFloat(celu.node("Celu", {"x"}, {"y"}, "celu"), "alpha", 0.0f);
  celu.output("y", DType::F32, {2});
  expectError([&] { import(celu); }, {"node 'celu' (Celu)", "alpha"});
}

// Before opset 13 Hardmax (like Softmax) works on the input coerced to 2-D at `axis`, so one
// element of all the trailing dims is marked; from 13 on one per slice along `axis`.
TEST(OnnxImportActivation, HardmaxAxisSemanticsByOpset) {
  Tensor x = Tensor::fromDoubles(DType::F32, {2, 2, 2}, {1, 4, 3, 2, 9, 0, 5, 9});
  for (int64_t opset : {11, 13}) {
    SCOPED_TRACE(opset);
    ModelBuilder m(opset);
    m.input("x", DType::F32, {2, 2, 2});
    setInt(m.node("Hardmax", {"x"}, {"y"}), "axis", 1);
    m.output("y", DType::F32, {2, 2, 2});
    auto graph = import(m);
    EXPECT_EQ(countOps(*graph, OpKind::Hardmax), 1);
    Tensor y = ir::evaluate(*graph, {x})[0];
    if (opset == 11) // rows [1, 4, 3, 2] and [9, 0, 5, 9]: first maxima at 1 and 0
      expectClose(y, {0, 1, 0, 0, 1, 0, 0, 0});
    else // pairs along dim 1: (1,3) (4,2) (9,5) (0,9)
      expectClose(y, {0, 1, 1, 0, 1, 0, 0, 1});
  }
}

} // namespace
