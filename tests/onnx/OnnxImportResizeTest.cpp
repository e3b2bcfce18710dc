// ONNX import of Resize (opsets 10, 11, 13, 18) and Upsample (7, 9): the output sizes and
// scales handed to kiln's resize, and values computed here from ONNX's coordinate rules.
#include <cmath>

#include "OnnxTestModel.h"

using namespace kiln;
using namespace kiln::onnxtest;
using ir::OpKind;

namespace {

Tensor floats(const Shape &shape, const std::vector<double> &values) {
  return Tensor::fromDoubles(DType::F32, shape, values);
}

/// Resize with X and the given operands by position (empty names for omitted ones).
ModelBuilder resizeModel(int64_t opset, const Shape &in, const Shape &out, const std::vector<std::string> &operands) {
  ModelBuilder m(opset);
  m.input("x", DType::F32, in);
  std::vector<std::string> inputs{"x"};
  inputs.insert(inputs.end(), operands.begin(), operands.end());
  m.node("Resize", inputs, {"y"}, "resize");
  m.output("y", DType::F32, out);
  return m;
}

onnx::NodeProto &resizeNode(ModelBuilder &m) { return *m.model.mutable_graph()->mutable_node(0); }

// Scales give floor(in * scale): 2 * 1.7 = 3.4 -> 3. Nearest with half_pixel and
// round_prefer_floor (the defaults) samples (x + 0.5) / scale - 0.5 rounded, halves down.
TEST(OnnxImportResize, Opset13ScalesFloorTheSizesAndKeepTheScales) {
  ModelBuilder m = resizeModel(13, {1, 1, 2, 2}, {1, 1, 4, 3}, {"", "scales"});
  m.initializer("scales", floats({4}, {1, 1, 2, 1.7}));
  auto graph = import(m);
  const ir::Node *resize = findOp(*graph, OpKind::Resize);
  ASSERT_NE(resize, nullptr);
  EXPECT_EQ(resize->attrInts("sizes"), (std::vector<int64_t>{1, 1, 4, 3}));
  EXPECT_NEAR(ir::attrFloats(resize->attrs(), "scales")[3], 1.7, 1e-6);
  Tensor y = ir::evaluate(*graph, {floats({1, 1, 2, 2}, {1, 2, 3, 4})})[0];
  std::vector<double> want;
  auto source = [](int64_t x, double scale, int64_t in) {
    double s = (double(x) + 0.5) / scale - 0.5;
    double f = std::floor(s);
    int64_t i = s - f > 0.5 ? int64_t(f) + 1 : int64_t(f);
    return std::clamp<int64_t>(i, 0, in - 1);
  };
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 3; ++c)
      want.push_back(1 + 2 * source(r, 2, 2) + source(c, float(1.7), 2));
  expectClose(y, want);
}

TEST(OnnxImportResize, Opset13SizesLinearHalfPixel) {
  ModelBuilder m = resizeModel(13, {1, 2}, {1, 4}, {"", "", "sizes"});
  m.initializer("sizes", Tensor::fromDoubles(DType::I64, {2}, {1, 4}));
  setString(resizeNode(m), "mode", "linear");
  auto graph = import(m);
  const ir::Node *resize = findOp(*graph, OpKind::Resize);
  ASSERT_NE(resize, nullptr);
  EXPECT_TRUE(ir::attrFloats(resize->attrs(), "scales").empty()); // sizes / in is used
  // Sources (x + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25, clamped to the edges.
  expectClose(ir::evaluate(*graph, {floats({1, 2}, {1, 2})})[0], {1, 1.25, 1.75, 2});
}

TEST(OnnxImportResize, Opset11EmptyScalesWithSizesAndBothGivenIsAnError) {
  ModelBuilder m = resizeModel(11, {1, 3}, {1, 6}, {"roi", "scales", "sizes"});
  m.initializer("roi", floats({0}, {}));
  m.initializer("scales", floats({0}, {}));
  m.initializer("sizes", Tensor::fromDoubles(DType::I64, {2}, {1, 6}));
  setString(resizeNode(m), "coordinate_transformation_mode", "asymmetric");
  setString(resizeNode(m), "nearest_mode", "floor");
  expectClose(run(m, {floats({1, 3}, {1, 2, 3})})[0], {1, 1, 2, 2, 3, 3});

  ModelBuilder both = resizeModel(11, {1, 3}, {1, 6}, {"roi", "scales", "sizes"});
  both.initializer("roi", floats({0}, {}));
  both.initializer("scales", floats({2}, {1, 2}));
  both.initializer("sizes", Tensor::fromDoubles(DType::I64, {2}, {1, 6}));
  expectError([&] { import(both); }, {"node 'resize' (Resize)", "exactly one of scales and sizes"});
}

TEST(OnnxImportResize, Opset18AxesAndKeepAspectRatio) {
  for (std::string policy : {"stretch", "not_larger", "not_smaller"}) {
    SCOPED_TRACE(policy);
    // sizes [3, 3] for axes 2, 3 of [1, 1, 2, 4]: ratios 1.5 and 0.75.
    Shape out = policy == "stretch"      ? Shape{1, 1, 3, 3}
                : policy == "not_larger" ? Shape{1, 1, 2, 3}
                                         : Shape{1, 1, 3, 6};
    ModelBuilder m = resizeModel(18, {1, 1, 2, 4}, out, {"", "", "sizes"});
    m.initializer("sizes", Tensor::fromDoubles(DType::I64, {2}, {3, 3}));
    setInts(resizeNode(m), "axes", {-2, 3});
    setString(resizeNode(m), "keep_aspect_ratio_policy", policy);
    auto graph = import(m);
    const ir::Node *resize = findOp(*graph, OpKind::Resize);
    ASSERT_NE(resize, nullptr);
    EXPECT_EQ(resize->attrInts("sizes"), out);
    Tensor y = ir::evaluate(*graph, {iota(DType::F32, {1, 1, 2, 4})})[0];
    EXPECT_EQ(y.shape(), out);
  }
}

// Opset 10's Resize and Upsample sample x / scale and take the floor for nearest.
TEST(OnnxImportResize, Opset10ResizeAndUpsampleUseAsymmetricFloor) {
  Tensor x = floats({1, 1, 2, 2}, {1, 2, 3, 4});
  std::vector<double> want; // rows doubled, columns tripled
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 6; ++c)
      want.push_back(1 + 2 * (r / 2) + c / 3);
  {
    ModelBuilder m = resizeModel(10, {1, 1, 2, 2}, {1, 1, 4, 6}, {"scales"});
    m.initializer("scales", floats({4}, {1, 1, 2, 3}));
    expectClose(run(m, {x})[0], want);
  }
  {
    ModelBuilder m(9);
    m.input("x", DType::F32, {1, 1, 2, 2});
    m.initializer("scales", floats({4}, {1, 1, 2, 3}));
    m.node("Upsample", {"x", "scales"}, {"y"});
    m.output("y", DType::F32, {1, 1, 4, 6});
    expectClose(run(m, {x})[0], want);
  }
  {
    ModelBuilder m(7);
    m.input("x", DType::F32, {1, 1, 2, 2});
    auto &up = m.node("Upsample", {"x"}, {"y"});
    setFloats(up, "scales", {1, 1, 2, 3});
    m.output("y", DType::F32, {1, 1, 4, 6});
    expectClose(run(m, {x})[0], want);
  }
  { // linear along one axis: x / 2 -> 0, 0.5, 1, 1.5 (the last clamps to the edge)
    ModelBuilder m(9);
    m.input("x", DType::F32, {1, 2});
    m.initializer("scales", floats({2}, {1, 2}));
    setString(m.node("Upsample", {"x", "scales"}, {"y"}), "mode", "linear");
    m.output("y", DType::F32, {1, 4});
    expectClose(run(m, {floats({1, 2}, {1, 3})})[0], {1, 2, 3, 3});
  }
}

} // namespace
