// passes/quantize/FiniteBound.h: the bounds it proves are true bounds (checked against the
// reference evaluator on random inputs), and it proves nothing where a value may not be
// finite: a float graph input, a constant holding infinity, scales that push past kLargest,
// an op it does not follow.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/Evaluator.h"
#include "passes/quantize/FiniteBound.h"
#include "tests/passes/PassTestUtil.h"

namespace {

using kiln::passes::quantize::FiniteBound;

const kiln::ir::Value *valueNamed(const kiln::ir::Graph &graph, const std::string &name) {
  for (const kiln::ir::Node *node : graph.nodes())
    for (const kiln::ir::Value *v : node->outputs())
      if (v->name() == name)
        return v;
  ADD_FAILURE() << "no value " << name;
  return nullptr;
}

TEST(FiniteBound, BoundsAQuantizedLayerAndProvesNothingElse) {
  auto graph = kiln::test::parseKir(R"(
graph @g(%x: u8[1,2,5,5], %f: f32[1,3,5,5]) -> (f32[1,3,5,5], f32[1,3,5,5], f32[1,3,5,5], f32[1,3,5,5], f32[1,3,5,5], f32[1,3,5,5]) {
  %w = constant tensor<i8[3,2,3,3]>[127, -128, 5, 9, -9, 77, 100, -100, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1, -2, -3, -4, -5, -6, -7, -8, -9, 60, 61, 62, 63, 64, 65, 66, 67, 68, -60, -61, -62, -63, -64, -65, -66, -67, -68, 10, 20, 30, 40, 50, 60, 70, 80, 90] : i8[3,2,3,3]
  %sx = constant tensor<f32[]>[0.5] : f32[]
  %zx = constant tensor<u8[]>[250] : u8[]
  %sw = constant tensor<f32[3]>[0.25, 2.0, 0.125] : f32[3]
  %b = constant tensor<f32[3,1,1]>[-3.0, 1000.0, 0.5] : f32[3,1,1]
  %inf = constant tensor<f32[3,1,1]>[1.0, inf, 2.0] : f32[3,1,1]
  %huge = constant tensor<f32[]>[1e30] : f32[]
  %c = qconv(%x, %w, %sx, %zx, %sw) {pads = [1, 1, 1, 1]} : f32[1,3,5,5]
  %cb = add(%c, %b) : f32[1,3,5,5]
  %r = relu(%cb) : f32[1,3,5,5]
  %m = max_pool(%r) {kernel = [3, 3], pads = [1, 1, 1, 1]} : f32[1,3,5,5]
  %withInput = add(%m, %f) : f32[1,3,5,5]
  %withInf = add(%m, %inf) : f32[1,3,5,5]
  %tooLarge = mul(%m, %huge) : f32[1,3,5,5]
  %exp = exp(%m) : f32[1,3,5,5]
  return %m, %withInput, %withInf, %tooLarge, %exp, %cb
}
)");
  ASSERT_TRUE(graph);
  FiniteBound bounds;
  const std::optional<double> bound = bounds.of(valueNamed(*graph, "m"));
  ASSERT_TRUE(bound.has_value());
  // qconv: 18 terms of |x - zero| <= 255 and |w| <= 128 times 0.5 * 2.0, then the bias.
  EXPECT_DOUBLE_EQ(*bound, 18 * 255.0 * 128.0 * 0.5 * 2.0 + 1000.0);
  EXPECT_EQ(bounds.of(valueNamed(*graph, "withInput")), std::nullopt); // f32 input: may be NaN
  EXPECT_EQ(bounds.of(valueNamed(*graph, "withInf")), std::nullopt);
  EXPECT_EQ(bounds.of(valueNamed(*graph, "tooLarge")), std::nullopt); // past kLargest
  EXPECT_EQ(bounds.of(valueNamed(*graph, "exp")), std::nullopt);      // an op it does not follow
  // The bound holds on the evaluator's values, for random inputs of every byte.
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    std::vector<kiln::Tensor> inputs;
    for (const kiln::ir::Value *input : graph->inputs())
      inputs.push_back(kiln::randomTensor(input->type(), seed));
    for (int64_t i = 0; i < inputs[0].numElements(); ++i) // x over every byte, not randomTensor's [0, 10)
      inputs[0].setDouble(i, static_cast<double>((i * 37 + static_cast<int64_t>(seed) * 101) % 256));
    const std::vector<kiln::Tensor> outputs = kiln::ir::evaluate(*graph, inputs);
    for (size_t o : {size_t{0}, size_t{5}}) // %m and %cb
      for (int64_t i = 0; i < outputs[o].numElements(); ++i)
        ASSERT_LE(std::fabs(outputs[o].getDouble(i)), *bounds.of(graph->outputs()[o]));
  }
}

TEST(FiniteBound, DeepChainsEndUnprovenNotInAStackOverflow) {
  std::string text = "graph @g(%x: u8[4]) -> (f32[4]) {\n"
                     "  %s = constant tensor<f32[]>[0.5] : f32[]\n  %z = constant tensor<u8[]>[3] : u8[]\n"
                     "  %v0 = dequantize_linear(%x, %s, %z) : f32[4]\n";
  for (int i = 1; i <= 200; ++i)
    text += "  %v" + std::to_string(i) + " = relu(%v" + std::to_string(i - 1) + ") : f32[4]\n";
  text += "  return %v200\n}\n";
  auto graph = kiln::test::parseKir(text);
  ASSERT_TRUE(graph);
  FiniteBound bounds;
  EXPECT_EQ(bounds.of(graph->outputs()[0]), std::nullopt);
  EXPECT_EQ(bounds.of(valueNamed(*graph, "v10")), (255.0 + 3.0) * 0.5); // near enough to the dequantize
}

} // namespace
