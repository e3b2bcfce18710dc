// ONNX import of the indexing and sequence ops (GatherElements, GatherND, Scatter,
// ScatterElements, ScatterND, Compress, OneHot, TopK, CumSum, Trilu): each becomes its kiln op
// and evaluates to values computed here with plain loops over the ONNX definitions.
#include "OnnxTestModel.h"

using namespace kiln;
using namespace kiln::onnxtest;
using ir::OpKind;

namespace {

Tensor i64(const Shape &shape, const std::vector<double> &values) {
  return Tensor::fromDoubles(DType::I64, shape, values);
}

TEST(OnnxImportIndexing, GatherElementsWithNegativeIndices) {
  ModelBuilder m(13);
  m.input("data", DType::F32, {2, 3});
  m.initializer("idx", i64({2, 2}, {-1, 0, 1, -3}));
  setInt(m.node("GatherElements", {"data", "idx"}, {"y"}), "axis", 1);
  m.output("y", DType::F32, {2, 2});
  Tensor data = iota(DType::F32, {2, 3});
  auto graph = import(m);
  EXPECT_EQ(countOps(*graph, OpKind::GatherElements), 1);
  // y[i][j] = data[i][idx[i][j] mod 3]
  expectClose(ir::evaluate(*graph, {data})[0], {2, 0, 4, 3});
}

TEST(OnnxImportIndexing, GatherNDWithBatchDims) {
  ModelBuilder m(13);
  m.input("data", DType::I32, {2, 2, 2});
  m.initializer("idx", i64({2, 1}, {1, 0}));
  setInt(m.node("GatherND", {"data", "idx"}, {"y"}), "batch_dims", 1);
  m.output("y", DType::I32, {2, 2});
  // Batch 0 takes data[0][1], batch 1 takes data[1][0].
  Tensor y = run(m, {iota(DType::I32, {2, 2, 2})})[0];
  EXPECT_EQ(y.dtype(), DType::I32);
  expectClose(y, {2, 3, 4, 5});
}

TEST(OnnxImportIndexing, ScatterElementsReductionFromOpset16AndScatterOpset9) {
  for (int64_t opset : {9, 16}) {
    SCOPED_TRACE(opset);
    ModelBuilder m(opset);
    m.input("data", DType::F32, {1, 4});
    m.initializer("idx", i64({1, 3}, {1, 3, 1}));
    m.initializer("upd", Tensor::fromDoubles(DType::F32, {1, 3}, {10, 20, 30}));
    auto &node = m.node(opset == 9 ? "Scatter" : "ScatterElements", {"data", "idx", "upd"}, {"y"});
    setInt(node, "axis", 1);
    if (opset == 16)
      setString(node, "reduction", "add");
    m.output("y", DType::F32, {1, 4});
    auto graph = import(m);
    EXPECT_EQ(countOps(*graph, OpKind::ScatterElements), 1);
    Tensor y = ir::evaluate(*graph, {Tensor::fromDoubles(DType::F32, {1, 4}, {1, 2, 3, 4})})[0];
    if (opset == 9) // overwrite; the repeated index keeps the last update
      expectClose(y, {1, 30, 3, 20});
    else
      expectClose(y, {1, 42, 3, 24});
  }
}

TEST(OnnxImportIndexing, ScatterNDMultiplyAndOutOfRangeIndex) {
  ModelBuilder m(16);
  m.input("data", DType::F32, {3, 2});
  m.input("idx", DType::I64, {2, 1});
  m.initializer("upd", Tensor::fromDoubles(DType::F32, {2, 2}, {2, 3, 4, 5}));
  setString(m.node("ScatterND", {"data", "idx", "upd"}, {"y"}), "reduction", "mul");
  m.output("y", DType::F32, {3, 2});
  auto graph = import(m);
  EXPECT_EQ(countOps(*graph, OpKind::ScatterNd), 1);
  Tensor data = Tensor::fromDoubles(DType::F32, {3, 2}, {1, 1, 1, 1, 1, 1});
  // Rows 2 and 2 again: multiplied by both updates in turn.
  expectClose(ir::evaluate(*graph, {data, i64({2, 1}, {2, -1})})[0], {1, 1, 1, 1, 8, 15});
  expectError([&] { ir::evaluate(*graph, {data, i64({2, 1}, {0, 3})}); }, {"scatter_nd", "index 3"});
}

TEST(OnnxImportIndexing, CompressWithAndWithoutAxis) {
  ModelBuilder m(11);
  m.input("x", DType::F32, {2, 3});
  m.initializer("keep", Tensor::fromDoubles(DType::Bool, {3}, {1, 0, 1}));
  setInt(m.node("Compress", {"x", "keep"}, {"cols"}), "axis", -1);
  m.node("Compress", {"x", "keep"}, {"flat"});
  m.output("cols", DType::F32, {2, 2});
  m.output("flat", DType::F32, {2});
  auto out = run(m, {iota(DType::F32, {2, 3})});
  expectClose(out[0], {0, 2, 3, 5});
  expectClose(out[1], {0, 2}); // the flattened input's first three elements, filtered

  ModelBuilder bad(11);
  bad.input("x", DType::F32, {2});
  bad.initializer("keep", Tensor::fromDoubles(DType::Bool, {3}, {0, 0, 1}));
  setInt(bad.node("Compress", {"x", "keep"}, {"y"}, "compress"), "axis", 0);
  bad.output("y", DType::F32, {1});
  expectError([&] { import(bad); }, {"node 'compress' (Compress)", "condition element 2 is true"});
}

TEST(OnnxImportIndexing, OneHotCastsFloatIndicesAndTakesNegativeAxis) {
  ModelBuilder m(11);
  m.input("idx", DType::F32, {3});
  m.initializer("depth", Tensor::fromDoubles(DType::F32, {}, {4}));
  m.initializer("values", Tensor::fromDoubles(DType::I32, {2}, {-1, 7}));
  setInt(m.node("OneHot", {"idx", "depth", "values"}, {"y"}), "axis", -2);
  m.output("y", DType::I32, {4, 3});
  auto graph = import(m);
  EXPECT_EQ(countOps(*graph, OpKind::OneHot), 1);
  // Indices 1.7 -> 1, -1 -> 3 (from the end), 9 -> out of range: all off. Axis -2 puts depth first.
  Tensor y = ir::evaluate(*graph, {Tensor::fromDoubles(DType::F32, {3}, {1.7, -1, 9})})[0];
  std::vector<double> want(12, -1);
  want[1 * 3 + 0] = 7;
  want[3 * 3 + 1] = 7;
  expectClose(y, want);
}

TEST(OnnxImportIndexing, TopKFormsByOpset) {
  Tensor x = Tensor::fromDoubles(DType::F32, {2, 4}, {3, 1, 4, 1, 5, 9, 2, 6});
  { // opset 9: k is an attribute, always the largest
    ModelBuilder m(9);
    m.input("x", DType::F32, {2, 4});
    setInt(m.node("TopK", {"x"}, {"v", "i"}), "k", 2);
    m.output("v", DType::F32, {2, 2});
    m.output("i", DType::I64, {2, 2});
    auto out = run(m, {x});
    expectClose(out[0], {4, 3, 9, 6});
    expectClose(out[1], {2, 0, 1, 3});
  }
  { // opset 11: K input, smallest along axis 0
    ModelBuilder m(11);
    m.input("x", DType::F32, {2, 4});
    m.initializer("k", i64({1}, {1}));
    auto &topk = m.node("TopK", {"x", "k"}, {"v", "i"});
    setInt(topk, "axis", 0);
    setInt(topk, "largest", 0);
    m.output("v", DType::F32, {1, 4});
    m.output("i", DType::I64, {1, 4});
    auto out = run(m, {x});
    expectClose(out[0], {3, 1, 2, 1});
    expectClose(out[1], {0, 0, 1, 0});
  }
  { // K from a graph input cannot decide the output shape
    ModelBuilder m(11);
    m.input("x", DType::F32, {2, 4});
    m.input("k", DType::I64, {1});
    m.node("TopK", {"x", "k"}, {"v", "i"}, "topk");
    m.output("v", DType::F32, {-1, -1});
    m.output("i", DType::I64, {-1, -1});
    expectError([&] { import(m); }, {"node 'topk' (TopK)", "the K", "known at import time"});
  }
}

TEST(OnnxImportIndexing, CumSumExclusiveReverseOnIntegers) {
  ModelBuilder m(14);
  m.input("x", DType::I64, {2, 3});
  m.initializer("axis", Tensor::fromDoubles(DType::I32, {}, {-1}));
  auto &node = m.node("CumSum", {"x", "axis"}, {"y"});
  setInt(node, "exclusive", 1);
  setInt(node, "reverse", 1);
  m.output("y", DType::I64, {2, 3});
  auto graph = import(m);
  EXPECT_EQ(countOps(*graph, OpKind::CumSum), 1);
  // Row [1, 2, 3]: sums of the elements after each one -> [5, 3, 0].
  expectClose(ir::evaluate(*graph, {i64({2, 3}, {1, 2, 3, 10, 20, 30})})[0], {5, 3, 0, 50, 30, 0});
}

TEST(OnnxImportIndexing, TriluWithAndWithoutK) {
  Tensor x = iota(DType::F32, {3, 3}, 1, 1); // 1..9
  ModelBuilder m(14);
  m.input("x", DType::F32, {3, 3});
  m.initializer("k", i64({}, {-1}));
  m.node("Trilu", {"x"}, {"upper"});
  setInt(m.node("Trilu", {"x", "k"}, {"lower"}), "upper", 0);
  m.output("upper", DType::F32, {3, 3});
  m.output("lower", DType::F32, {3, 3});
  auto graph = import(m);
  EXPECT_EQ(countOps(*graph, OpKind::Trilu), 2);
  auto out = ir::evaluate(*graph, {x});
  std::vector<double> upper, lower;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) {
      double v = 1 + r * 3 + c;
      upper.push_back(c - r >= 0 ? v : 0);
      lower.push_back(c - r <= -1 ? v : 0);
    }
  expectClose(out[0], upper);
  expectClose(out[1], lower);
}

// y[t][b] = x[len[b] - 1 - t][b] for t < len[b], else x[t][b].
TEST(OnnxImportIndexing, ReverseSequenceTimeAndBatchMajor) {
  for (int64_t batchAxis : {0, 1}) {
    SCOPED_TRACE(batchAxis);
    int64_t timeAxis = 1 - batchAxis;
    Shape shape = batchAxis == 1 ? Shape{4, 3, 2} : Shape{3, 4, 2}; // 4 steps, 3 entries, 2 features
    ModelBuilder m(10);
    m.input("x", DType::F32, shape);
    m.initializer("lens", i64({3}, {4, 1, 3}));
    auto &node = m.node("ReverseSequence", {"x", "lens"}, {"y"});
    setInt(node, "batch_axis", batchAxis);
    setInt(node, "time_axis", timeAxis);
    m.output("y", DType::F32, shape);
    Tensor x = iota(DType::F32, shape);
    Tensor y = run(m, {x})[0];
    int64_t lens[] = {4, 1, 3};
    auto at = [&](int64_t t, int64_t b, int64_t f) {
      return batchAxis == 1 ? (t * 3 + b) * 2 + f : (b * 4 + t) * 2 + f;
    };
    std::vector<double> want(24);
    for (int64_t t = 0; t < 4; ++t)
      for (int64_t b = 0; b < 3; ++b)
        for (int64_t f = 0; f < 2; ++f)
          want[at(t, b, f)] = x.getDouble(at(t < lens[b] ? lens[b] - 1 - t : t, b, f));
    expectClose(y, want);
  }
}

TEST(OnnxImportIndexing, MaxUnpoolScattersAndPadsToOutputShape) {
  ModelBuilder m(11);
  m.input("x", DType::F32, {1, 1, 2, 2});
  m.input("i", DType::I64, {1, 1, 2, 2});
  m.initializer("shape", i64({4}, {1, 1, 5, 4}));
  auto &plain = m.node("MaxUnpool", {"x", "i"}, {"y"});
  setInts(plain, "kernel_shape", {2, 2});
  setInts(plain, "strides", {2, 2});
  auto &shaped = m.node("MaxUnpool", {"x", "i", "shape"}, {"z"});
  setInts(shaped, "kernel_shape", {2, 2});
  setInts(shaped, "strides", {2, 2});
  m.output("y", DType::F32, {1, 1, 4, 4});
  m.output("z", DType::F32, {1, 1, 5, 4});
  auto out = run(m, {Tensor::fromDoubles(DType::F32, {1, 1, 2, 2}, {1, 2, 3, 4}), i64({1, 1, 2, 2}, {0, 7, 9, 14})});
  std::vector<double> want(16, 0);
  want[0] = 1;
  want[7] = 2;
  want[9] = 3;
  want[14] = 4;
  expectClose(out[0], want);
  want.resize(20, 0); // one more zero row at the end
  expectClose(out[1], want);
}

} // namespace
