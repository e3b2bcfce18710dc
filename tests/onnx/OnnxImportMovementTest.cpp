// ONNX import of movement, reduction and shape ops: static operands given as attributes or
// as inputs (by opset), Shape subgraphs folded at import time, and the ONNX-only conventions
// (Reshape's 0, Expand's two-way broadcast, Split's forms) checked against hand-written values.
#include <functional>

#include "OnnxTestModel.h"

using namespace kiln;
using namespace kiln::onnxtest;

namespace {

Tensor i64s(const std::vector<double> &values) {
  return Tensor::fromDoubles(DType::I64, {static_cast<int64_t>(values.size())}, values);
}

// Reshape's target comes from Shape -> Gather -> Unsqueeze -> Concat, the pattern PyTorch
// exports for x.view(x.size(0), -1); it folds away, leaving one reshape.
TEST(OnnxImportMovement, ReshapeFromShapeSubgraphFoldsToOneReshape) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {2, 3, 4});
  m.node("Shape", {"x"}, {"shape"});
  m.constant("zero", Tensor::scalar(DType::I64, 0));
  m.node("Gather", {"shape", "zero"}, {"batch"});
  m.constant("axes0", i64s({0}));
  m.node("Unsqueeze", {"batch", "axes0"}, {"batch1"});
  m.constant("minus1", i64s({-1}));
  setInt(m.node("Concat", {"batch1", "minus1"}, {"target"}), "axis", 0);
  m.node("Reshape", {"x", "target"}, {"y"});
  // A 0 copies the input's dim: [0, -1] is also [2, 12].
  m.constant("zeroShape", i64s({0, 4, -1}));
  m.node("Reshape", {"x", "zeroShape"}, {"z"});
  m.output("y", DType::F32, {2, 12});
  m.output("z", DType::F32, {2, 4, 3});
  auto graph = import(m);
  ASSERT_EQ(graph->numNodes(), 2u);
  for (ir::Node *node : graph->nodes())
    EXPECT_EQ(node->op(), ir::OpKind::Reshape);
  EXPECT_EQ(graph->outputs()[0]->shape(), (Shape{2, 12}));
  Tensor x = iota(DType::F32, {2, 3, 4});
  auto out = ir::evaluate(*graph, {x});
  EXPECT_TRUE(out[0].identical(x.reshaped({2, 12})));
  EXPECT_TRUE(out[1].identical(x.reshaped({2, 4, 3})));
}

TEST(OnnxImportMovement, ReshapeAllowZeroKeepsAZeroSizeDim) {
  ModelBuilder m(14);
  m.input("x", DType::F32, {0, 3});
  m.constant("shape", i64s({3, 0}));
  setInt(m.node("Reshape", {"x", "shape"}, {"y"}), "allowzero", 1);
  m.output("y", DType::F32, {3, 0});
  auto graph = import(m);
  EXPECT_EQ(graph->outputs()[0]->shape(), (Shape{3, 0}));
}

TEST(OnnxImportMovement, SplitForms) {
  Tensor x = iota(DType::F32, {7, 2});
  struct Case {
    int64_t opset;
    std::vector<int64_t> sizes; // expected
    std::function<void(ModelBuilder &)> node;
  };
  std::vector<Case> cases = {
      {11,
       {2, 5},
       [](ModelBuilder &m) {
         setInts(m.node("Split", {"x"}, {"a", "b"}), "split", {2, 5});
       }},
      {13,
       {3, 4},
       [](ModelBuilder &m) {
         m.constant("sizes", i64s({3, 4}));
         m.node("Split", {"x", "sizes"}, {"a", "b"});
       }},
      // Opset 18: chunks of ceil(7 / 3) = 3, the last one smaller.
      {18,
       {3, 3, 1},
       [](ModelBuilder &m) {
         setInt(m.node("Split", {"x"}, {"a", "b", "c"}), "num_outputs", 3);
       }},
  };
  for (const Case &c : cases) {
    ModelBuilder m(c.opset);
    m.input("x", DType::F32, {7, 2});
    c.node(m);
    const char *names[] = {"a", "b", "c"};
    for (size_t k = 0; k < c.sizes.size(); ++k)
      m.output(names[k], DType::F32, {c.sizes[k], 2});
    auto out = run(m, {x});
    ASSERT_EQ(out.size(), c.sizes.size());
    int64_t row = 0;
    for (size_t k = 0; k < out.size(); ++k) {
      SCOPED_TRACE(::testing::Message() << "opset " << c.opset << " output " << k);
      EXPECT_EQ(out[k].shape(), (Shape{c.sizes[k], 2}));
      for (int64_t i = 0; i < out[k].numElements(); ++i)
        EXPECT_EQ(out[k].getDouble(i), static_cast<double>(row * 2 + i));
      row += c.sizes[k];
    }
  }
}

TEST(OnnxImportMovement, SplitEvenlyWithoutSizesAndUnevenIsAnError) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {6});
  m.node("Split", {"x"}, {"a", "b", "c"});
  for (const char *name : {"a", "b", "c"})
    m.output(name, DType::F32, {2});
  auto out = run(m, {iota(DType::F32, {6})});
  expectClose(out[2], {4, 5});

  ModelBuilder bad(13);
  bad.input("x", DType::F32, {7});
  bad.node("Split", {"x"}, {"a", "b"}, "halves");
  bad.output("a", DType::F32, {-1});
  bad.output("b", DType::F32, {-1});
  expectError([&] { import(bad); }, {"halves", "evenly"});
}

TEST(OnnxImportMovement, ReduceSumAxesInputAndNoopWithEmptyAxes) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {2, 3});
  m.constant("axes", i64s({-1}));
  setInt(m.node("ReduceSum", {"x", "axes"}, {"rows"}), "keepdims", 0);
  m.node("ReduceSum", {"x"}, {"all"}); // no axes: every axis, keepdims defaults to 1
  setInt(m.node("ReduceSum", {"x"}, {"same"}), "noop_with_empty_axes", 1);
  m.output("rows", DType::F32, {2});
  m.output("all", DType::F32, {1, 1});
  m.output("same", DType::F32, {2, 3});
  Tensor x = iota(DType::F32, {2, 3});
  auto out = run(m, {x});
  expectClose(out[0], {3, 12});
  expectClose(out[1], {15});
  EXPECT_TRUE(out[2].identical(x));
}

TEST(OnnxImportMovement, ReduceMeanAxesAttributeBefore18InputFrom18) {
  Tensor x = iota(DType::F32, {2, 3});
  for (int64_t opset : {13, 18}) {
    ModelBuilder m(opset);
    m.input("x", DType::F32, {2, 3});
    if (opset == 13) {
      setInts(m.node("ReduceMean", {"x"}, {"y"}), "axes", {0});
    } else {
      m.constant("axes", i64s({0}));
      m.node("ReduceMean", {"x", "axes"}, {"y"});
    }
    m.output("y", DType::F32, {1, 3});
    SCOPED_TRACE(opset);
    expectClose(run(m, {x})[0], {1.5, 2.5, 3.5});
  }
}

TEST(OnnxImportMovement, SliceAttributesBefore10InputsWithStepsFrom10) {
  Tensor x = iota(DType::F32, {3, 5});
  ModelBuilder old(9);
  old.input("x", DType::F32, {3, 5});
  auto &slice = old.node("Slice", {"x"}, {"y"});
  setInts(slice, "starts", {1});
  setInts(slice, "ends", {100}); // clamped to the dim
  setInts(slice, "axes", {1});
  old.output("y", DType::F32, {3, 4});
  EXPECT_TRUE(
      run(old, {x})[0].identical(Tensor::fromDoubles(DType::F32, {3, 4}, {1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13, 14})));
  ModelBuilder m(13);
  m.input("x", DType::F32, {3, 5});
  m.constant("starts", i64s({-1}));
  m.constant("ends", i64s({-100}));
  m.constant("axes", i64s({1}));
  m.constant("steps", i64s({-2}));
  m.node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
  m.output("y", DType::F32, {3, 3});
  expectClose(run(m, {x})[0], {4, 2, 0, 9, 7, 5, 14, 12, 10});
}

TEST(OnnxImportMovement, PadReflectAndOpset18Axes) {
  ModelBuilder m(18);
  m.input("x", DType::F32, {2, 3});
  m.constant("pads", i64s({1, 1}));
  m.constant("value", Tensor::scalar(DType::F32, 9));
  m.constant("axes", i64s({-1}));
  m.node("Pad", {"x", "pads", "value", "axes"}, {"y"});
  m.constant("pads2", i64s({0, 2, 0, 0}));
  setString(m.node("Pad", {"x", "pads2"}, {"r"}), "mode", "reflect");
  m.output("y", DType::F32, {2, 5});
  m.output("r", DType::F32, {2, 5});
  auto out = run(m, {iota(DType::F32, {2, 3})});
  expectClose(out[0], {9, 0, 1, 2, 9, 9, 3, 4, 5, 9});
  expectClose(out[1], {2, 1, 0, 1, 2, 5, 4, 3, 4, 5});
}

TEST(OnnxImportMovement, ExpandBroadcastsBothWaysAndTileRepeats) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {3, 1});
  m.constant("shape", i64s({2, 1, 4})); // the 1 keeps x's 3
  m.node("Expand", {"x", "shape"}, {"e"});
  m.constant("repeats", i64s({2, 3}));
  m.node("Tile", {"x", "repeats"}, {"t"});
  m.output("e", DType::F32, {2, 3, 4});
  m.output("t", DType::F32, {6, 3});
  auto out = run(m, {Tensor::fromDoubles(DType::F32, {3, 1}, {1, 2, 3})});
  EXPECT_EQ(out[0].shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(out[0].getDouble(23), 3);
  expectClose(out[1], {1, 1, 1, 2, 2, 2, 3, 3, 3, 1, 1, 1, 2, 2, 2, 3, 3, 3});
}

TEST(OnnxImportMovement, FlattenTransposeSqueezeUnsqueezeForms) {
  ModelBuilder m(11);
  m.input("x", DType::F32, {2, 1, 3});
  setInt(m.node("Flatten", {"x"}, {"f"}), "axis", 0);
  m.node("Transpose", {"x"}, {"t"}); // default: reversed dims
  m.node("Squeeze", {"x"}, {"s"});
  setInts(m.node("Unsqueeze", {"x"}, {"u"}), "axes", {-1});
  m.output("f", DType::F32, {1, 6});
  m.output("t", DType::F32, {3, 1, 2});
  m.output("s", DType::F32, {2, 3});
  m.output("u", DType::F32, {2, 1, 3, 1});
  auto out = run(m, {iota(DType::F32, {2, 1, 3})});
  EXPECT_EQ(out[0].shape(), (Shape{1, 6}));
  expectClose(out[1], {0, 3, 1, 4, 2, 5});
  EXPECT_EQ(out[2].shape(), (Shape{2, 3}));
  EXPECT_EQ(out[3].shape(), (Shape{2, 1, 3, 1}));
}

TEST(OnnxImportMovement, ConstantFormsRangeAndConstantOfShape) {
  ModelBuilder m(13);
  auto &ints = m.node("Constant", {}, {"ints"});
  setInts(ints, "value_ints", {4, 5});
  auto &one = m.node("Constant", {}, {"f"});
  setFloat(one, "value_float", 2.5f);
  m.constant("start", Tensor::scalar(DType::I64, 10));
  m.constant("limit", Tensor::scalar(DType::I64, 3));
  m.constant("delta", Tensor::scalar(DType::I64, -3));
  m.node("Range", {"start", "limit", "delta"}, {"r"});
  auto &fill = m.node("ConstantOfShape", {"ints"}, {"c"});
  auto *value = fill.add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  *value->mutable_t() = tensorProto(Tensor::fromDoubles(DType::I32, {1}, {7}));
  m.output("r", DType::I64, {3});
  m.output("f", DType::F32, {});
  m.output("c", DType::I32, {4, 5});
  auto out = run(m, {});
  expectClose(out[0], {10, 7, 4});
  expectClose(out[1], {2.5});
  EXPECT_EQ(out[2].shape(), (Shape{4, 5}));
  EXPECT_EQ(out[2].getInt(19), 7);
}

TEST(OnnxImportMovement, ClipBoundsFromAttributesAndConstantInputs) {
  Tensor x = Tensor::fromDoubles(DType::F32, {4}, {-5, -1, 1, 5});
  ModelBuilder old(10);
  old.input("x", DType::F32, {4});
  auto &clip = old.node("Clip", {"x"}, {"y"});
  setFloat(clip, "min", -2);
  setFloat(clip, "max", 2);
  old.output("y", DType::F32, {4});
  expectClose(run(old, {x})[0], {-2, -1, 1, 2});
  ModelBuilder m(13);
  m.input("x", DType::F32, {4});
  m.constant("hi", Tensor::scalar(DType::F32, 0.5));
  m.node("Clip", {"x", "", "hi"}, {"y"}); // no lower bound
  m.output("y", DType::F32, {4});
  expectClose(run(m, {x})[0], {-5, -1, 0.5, 0.5});
}

TEST(OnnxImportMovement, GatherAndVariadicMean) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {3, 2});
  m.initializer("idx", Tensor::fromDoubles(DType::I64, {2}, {2, -3}));
  m.initializer("w", Tensor::fromDoubles(DType::F32, {2}, {3, 6}));
  setInt(m.node("Gather", {"x", "idx"}, {"g"}), "axis", 0);
  m.node("Mean", {"x", "w", "x"}, {"mean"}); // broadcasts like Sum
  m.output("g", DType::F32, {2, 2});
  m.output("mean", DType::F32, {3, 2});
  Tensor x = iota(DType::F32, {3, 2});
  auto out = run(m, {x});
  expectClose(out[0], {4, 5, 0, 1});
  std::vector<double> want;
  for (int i = 0; i < 6; ++i)
    want.push_back((2 * x.getDouble(i) + (i % 2 == 0 ? 3 : 6)) / 3);
  expectClose(out[1], want);
}

TEST(OnnxImportMovement, SymbolicDimsNeedOptions) {
  ModelBuilder m(13);
  m.input("x", DType::F32, {-1, 3});
  m.node("Relu", {"x"}, {"y"});
  m.output("y", DType::F32, {-1, 3});
  expectError([&] { import(m); }, {"test.onnx", "graph input 'x'", "symbolic"});
  frontend::OnnxImportOptions byShape;
  byShape.inputShapes["x"] = {2, 3};
  EXPECT_EQ(import(m, byShape)->inputs()[0]->shape(), (Shape{2, 3}));
  frontend::OnnxImportOptions byParam;
  byParam.dimParams["d0"] = 5;
  EXPECT_EQ(import(m, byParam)->inputs()[0]->shape(), (Shape{5, 3}));
  frontend::OnnxImportOptions wrong;
  wrong.inputShapes["x"] = {2, 4};
  expectError([&] { import(m, wrong); }, {"graph input 'x'", "declares dim 1 as 3"});
}

} // namespace
