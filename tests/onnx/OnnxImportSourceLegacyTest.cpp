// ONNX ops whose results kiln knows at import time (EyeLike, the window functions), opset 1-6
// forms (legacy broadcasting, attributes that later became inputs), and graph inputs whose
// values are fixed by the import options.
#include <cmath>

#include "OnnxTestModel.h"

using namespace kiln;
using namespace kiln::onnxtest;
using ir::OpKind;

namespace {

TEST(OnnxImportSource, EyeLikeOffsetAndDtype) {
  ModelBuilder m(9);
  m.input("x", DType::F32, {3, 4});
  setInt(m.node("EyeLike", {"x"}, {"same"}), "k", -1);
  auto &typed = m.node("EyeLike", {"x"}, {"typed"});
  setInt(typed, "k", 2);
  setInt(typed, "dtype", onnx::TensorProto::INT32);
  m.output("same", DType::F32, {3, 4});
  m.output("typed", DType::I32, {3, 4});
  auto graph = import(m);
  EXPECT_EQ(graph->numNodes(), 2u); // two constants: nothing depends on x's values
  auto out = ir::evaluate(*graph, {iota(DType::F32, {3, 4})});
  std::vector<double> below(12, 0), above(12, 0);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) {
      below[r * 4 + c] = c - r == -1;
      above[r * 4 + c] = c - r == 2;
    }
  expectClose(out[0], below);
  EXPECT_EQ(out[1].dtype(), DType::I32);
  expectClose(out[1], above);
}

TEST(OnnxImportSource, WindowFunctionsPeriodicAndSymmetric) {
  const double pi = std::acos(-1.0);
  struct Window {
    const char *op;
    std::vector<double> a;
  };
  for (const Window &w : {Window{"HannWindow", {0.5, 0.5}}, Window{"HammingWindow", {25.0 / 46, 21.0 / 46}},
                          Window{"BlackmanWindow", {0.42, 0.5, 0.08}}}) {
    for (int64_t periodic : {0, 1}) {
      SCOPED_TRACE(std::string(w.op) + (periodic ? " periodic" : " symmetric"));
      ModelBuilder m(17);
      m.initializer("size", Tensor::fromDoubles(DType::I64, {}, {6}));
      auto &node = m.node(w.op, {"size"}, {"y"});
      setInt(node, "periodic", periodic);
      setInt(node, "output_datatype", onnx::TensorProto::DOUBLE);
      m.output("y", DType::F64, {6});
      Tensor y = run(m, {})[0];
      double n = periodic ? 6 : 5;
      for (int64_t i = 0; i < 6; ++i) {
        double want =
            w.a[0] - w.a[1] * std::cos(2 * pi * i / n) + (w.a.size() > 2 ? w.a[2] * std::cos(4 * pi * i / n) : 0);
        EXPECT_NEAR(y.getDouble(i), want, 1e-12) << "n = " << i;
      }
    }
  }
}

TEST(OnnxImportLegacy, Opset1BinaryBroadcastNeedsTheAttribute) {
  ModelBuilder m(1);
  m.input("a", DType::F32, {2, 3, 2});
  m.input("b", DType::F32, {3});
  auto &add = m.node("Add", {"a", "b"}, {"y"});
  setInt(add, "broadcast", 1);
  setInt(add, "axis", 1);
  m.output("y", DType::F32, {2, 3, 2});
  Tensor a = iota(DType::F32, {2, 3, 2}), b = Tensor::fromDoubles(DType::F32, {3}, {100, 200, 300});
  std::vector<double> want;
  for (int i = 0; i < 12; ++i)
    want.push_back(i + 100 * (1 + (i / 2) % 3)); // b runs along dim 1
  expectClose(run(m, {a, b})[0], want);

  ModelBuilder strict(6);
  strict.input("a", DType::F32, {2, 3});
  strict.input("b", DType::F32, {3});
  strict.node("Mul", {"a", "b"}, {"y"}, "mul");
  strict.output("y", DType::F32, {2, 3});
  expectError([&] { import(strict); }, {"node 'mul' (Mul)", "broadcast=1"});
}

TEST(OnnxImportLegacy, Opset1CastReshapePadAndConcatForms) {
  ModelBuilder m(1);
  m.input("x", DType::F32, {2, 2});
  setString(m.node("Cast", {"x"}, {"i"}), "to", "INT32");
  setInts(m.node("Reshape", {"x"}, {"flat"}), "shape", {4});
  auto &pad = m.node("Pad", {"flat"}, {"padded"});
  setInts(pad, "paddings", {1, 2});
  setFloat(pad, "value", -1.0f);
  m.node("Concat", {"x", "x"}, {"wide"}); // axis defaults to 1 before opset 4
  m.output("i", DType::I32, {2, 2});
  m.output("padded", DType::F32, {7});
  m.output("wide", DType::F32, {2, 4});
  auto out = run(m, {Tensor::fromDoubles(DType::F32, {2, 2}, {1.5, -2.5, 3, 4})});
  EXPECT_EQ(out[0].dtype(), DType::I32);
  expectClose(out[0], {1, -2, 3, 4});
  expectClose(out[1], {-1, 1.5, -2.5, 3, 4, -1, -1});
  expectClose(out[2], {1.5, -2.5, 1.5, -2.5, 3, 4, 3, 4});
}

TEST(OnnxImportOptions, InputValuesServeStaticOperandsAndStayInputs) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {2, 3});
  m.input("shape", DType::I64, {2});
  m.node("Reshape", {"x", "shape"}, {"y"});
  m.output("y", DType::F32, {3, 2});
  Tensor shape = Tensor::fromDoubles(DType::I64, {2}, {3, -1});
  frontend::OnnxImportOptions options;
  options.inputValues["shape"] = shape;
  auto graph = import(m, options);
  ASSERT_EQ(graph->inputs().size(), 2u); // still bound by the caller
  EXPECT_EQ(countOps(*graph, OpKind::Reshape), 1);
  Tensor y = ir::evaluate(*graph, {iota(DType::F32, {2, 3}), shape})[0];
  EXPECT_EQ(y.shape(), (Shape{3, 2}));

  options.inputValues["shape"] = Tensor::fromDoubles(DType::I32, {2}, {3, -1});
  expectError([&] { import(m, options); }, {"graph input 'shape'", "i32[2]", "i64[2]"});
  options.inputValues.clear();
  options.inputValues["nothere"] = shape;
  expectError([&] { import(m, options); }, {"'nothere'", "not a graph input"});
}

} // namespace
