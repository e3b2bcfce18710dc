// Movement ops (ir/ops/Movement.cpp, ir/ops/MovementRegion.cpp): every op built through
// ir::Builder, verified, and evaluated with ir::evaluate; expected values are hand-written or
// computed by plain loops over the obvious index formula.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>

#include "ir/Builder.h"
#include "ir/Error.h"
#include "ir/Evaluator.h"
#include "ir/Verifier.h"

using namespace kiln;
using namespace kiln::ir;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

/// 0, 1, 2, ... in row-major order.
Tensor seq(DType dtype, Shape shape) {
  std::vector<double> values(static_cast<size_t>(numElements(shape)));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<double>(i);
  return Tensor::fromDoubles(dtype, std::move(shape), values);
}

/// Builds a one-node graph over `inputs`, verifies it and evaluates it.
std::vector<Tensor> runAll(OpKind op, const std::vector<Tensor> &inputs, AttrMap attrs) {
  Graph graph("test");
  std::vector<Value *> args;
  for (const Tensor &t : inputs)
    args.push_back(graph.addInput(t.type()));
  Builder builder(graph);
  graph.setOutputs(builder.createMulti(op, args, std::move(attrs)));
  verify(graph);
  return evaluate(graph, inputs);
}

Tensor run(OpKind op, const std::vector<Tensor> &inputs, AttrMap attrs) {
  std::vector<Tensor> outs = runAll(op, inputs, std::move(attrs));
  EXPECT_EQ(outs.size(), 1u);
  return outs.at(0);
}

/// The message of the kiln::Error that `fn` throws; a test failure if it throws none.
std::string errorFrom(const std::function<void()> &fn) {
  std::string message = "<no kiln::Error>";
  EXPECT_THROW(
      try { fn(); } catch (const Error &e) {
        message = e.what();
        throw;
      },
      Error);
  return message;
}
#define EXPECT_ERROR(statement, fragment)                                                                    \
  EXPECT_PRED_FORMAT2(testing::IsSubstring, fragment, errorFrom([&] { statement; }))

std::vector<double> values(const Tensor &t) { return t.toDoubles(); }
TensorType f32(Shape shape) { return {DType::F32, std::move(shape)}; }
Attribute ints(std::vector<int64_t> v) { return v; }
Attribute int1(int64_t v) { return v; }

} // namespace

// ---- reshape ---------------------------------------------------------------------------------

TEST(OpsMovementReshape, KeepsRowMajorOrder) {
  Tensor y = run(OpKind::Reshape, {seq(DType::F32, {2, 3})}, {{"shape", ints({3, 2})}});
  EXPECT_EQ(y.type(), f32({3, 2}));
  EXPECT_EQ(values(y), values(seq(DType::F32, {6})));
}

TEST(OpsMovementReshape, InfersMinusOneAndKeepsZeroAsZero) {
  EXPECT_EQ(inferTypes(OpKind::Reshape, {f32({2, 3, 4})}, {{"shape", ints({-1, 4})}})[0].shape,
            Shape({6, 4}));
  EXPECT_EQ(inferTypes(OpKind::Reshape, {f32({2, 3, 4})}, {{"shape", ints({4, -1})}})[0].shape,
            Shape({4, 6}));
  // 0 is a zero-size dim, not ONNX's "copy the input dim".
  EXPECT_EQ(inferTypes(OpKind::Reshape, {f32({2, 0, 3})}, {{"shape", ints({0, 5})}})[0].shape, Shape({0, 5}));
  EXPECT_EQ(inferTypes(OpKind::Reshape, {f32({2, 0, 3})}, {{"shape", ints({-1, 7})}})[0].shape,
            Shape({0, 7}));
  EXPECT_ERROR(inferTypes(OpKind::Reshape, {f32({2, 3})}, {{"shape", ints({0, 3})}}), "cannot reshape");
}

TEST(OpsMovementReshape, ScalarsAndExactIntegers) {
  Tensor scalar = Tensor::scalar(DType::I64, 0);
  const int64_t big = (int64_t{1} << 53) + 1; // not representable in double
  scalar.setInt(0, big);
  Tensor y = run(OpKind::Reshape, {scalar}, {{"shape", ints({1, 1})}});
  EXPECT_EQ(y.shape(), Shape({1, 1}));
  EXPECT_EQ(y.getInt(0), big);
  Tensor back = run(OpKind::Reshape, {y}, {{"shape", ints({})}});
  EXPECT_EQ(back.rank(), 0);
  EXPECT_EQ(back.getInt(0), big);
}

TEST(OpsMovementReshape, Errors) {
  auto infer = [](Shape in, std::vector<int64_t> shape) {
    inferTypes(OpKind::Reshape, {f32(std::move(in))}, {{"shape", ints(std::move(shape))}});
  };
  EXPECT_ERROR(infer({2, 3}, {-1, -1}), "more than one -1");
  EXPECT_ERROR(infer({2, 3}, {-2, 3}), "negative dimension -2");
  EXPECT_ERROR(infer({2, 3}, {4, 2}), "cannot reshape [2,3] (6 elements) into [4,2] (8 elements)");
  EXPECT_ERROR(infer({2, 3}, {4, -1}), "not a multiple of 4");
  EXPECT_ERROR(infer({2, 0}, {0, -1}), "cannot infer the -1");
  EXPECT_ERROR(infer({2, 3}, {kMax, kMax}), "more elements than fit in int64");
  Graph graph;
  Builder builder(graph);
  EXPECT_ERROR(builder.create(OpKind::Reshape, {graph.addInput(f32({2}))}),
               "missing required attribute 'shape'");
}

// ---- permute ---------------------------------------------------------------------------------

TEST(OpsMovementPermute, MovesAxesWithNegativeEntries) {
  Tensor x = seq(DType::I32, {2, 3, 4});
  for (auto perm : {std::vector<int64_t>{2, 0, 1}, std::vector<int64_t>{-1, 0, -2}}) {
    Tensor y = run(OpKind::Permute, {x}, {{"perm", ints(perm)}});
    ASSERT_EQ(y.type(), TensorType({DType::I32, {4, 2, 3}}));
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t k = 0; k < 3; ++k) // y[i][j][k] = x[j][k][i]
          EXPECT_EQ(y.getInt(i * 6 + j * 3 + k), x.getInt(j * 12 + k * 4 + i));
  }
}

TEST(OpsMovementPermute, ScalarEmptyAndBool) {
  EXPECT_EQ(values(run(OpKind::Permute, {Tensor::scalar(DType::F32, 7)}, {{"perm", ints({})}})),
            std::vector<double>{7});
  Tensor empty = run(OpKind::Permute, {seq(DType::F32, {2, 0, 3})}, {{"perm", ints({2, 1, 0})}});
  EXPECT_EQ(empty.shape(), Shape({3, 0, 2}));
  Tensor b = Tensor::fromDoubles(DType::Bool, {2, 2}, {1, 0, 0, 0});
  EXPECT_EQ(values(run(OpKind::Permute, {b}, {{"perm", ints({1, 0})}})), std::vector<double>({1, 0, 0, 0}));
  Tensor b2 = Tensor::fromDoubles(DType::Bool, {2, 2}, {0, 1, 0, 0});
  EXPECT_EQ(values(run(OpKind::Permute, {b2}, {{"perm", ints({1, 0})}})), std::vector<double>({0, 0, 1, 0}));
}

TEST(OpsMovementPermute, Errors) {
  auto infer = [](std::vector<int64_t> perm) {
    inferTypes(OpKind::Permute, {f32({2, 3, 4})}, {{"perm", ints(std::move(perm))}});
  };
  EXPECT_ERROR(infer({1, 0}), "has 2 entries, but the operand has rank 3");
  EXPECT_ERROR(infer({0, 1, 1}), "axis 1 appears twice");
  EXPECT_ERROR(infer({0, 1, 3}), "axis 3 is out of range for rank 3");
  EXPECT_ERROR(infer({0, -3, 2}), "axis -3 appears twice"); // -3 is axis 0 again
}

// ---- broadcast -------------------------------------------------------------------------------

TEST(OpsMovementBroadcast, StretchesSizeOneDimsAndAddsLeadingOnes) {
  Tensor x = seq(DType::F32, {2, 1, 3});
  Tensor y = run(OpKind::Broadcast, {x}, {{"shape", ints({4, 2, 5, 3})}});
  ASSERT_EQ(y.shape(), Shape({4, 2, 5, 3}));
  for (int64_t a = 0; a < 4; ++a)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t c = 0; c < 5; ++c)
        for (int64_t d = 0; d < 3; ++d)
          EXPECT_EQ(y.getDouble(((a * 2 + b) * 5 + c) * 3 + d), x.getDouble(b * 3 + d));
  EXPECT_EQ(values(run(OpKind::Broadcast, {Tensor::scalar(DType::I8, -3)}, {{"shape", ints({2, 2})}})),
            std::vector<double>({-3, -3, -3, -3}));
  EXPECT_EQ(run(OpKind::Broadcast, {seq(DType::F32, {1})}, {{"shape", ints({0})}}).shape(), Shape({0}));
  EXPECT_EQ(run(OpKind::Broadcast, {seq(DType::F32, {0, 1})}, {{"shape", ints({3, 0, 2})}}).shape(),
            Shape({3, 0, 2}));
}

TEST(OpsMovementBroadcast, Errors) {
  auto infer = [](Shape in, std::vector<int64_t> shape) {
    inferTypes(OpKind::Broadcast, {f32(std::move(in))}, {{"shape", ints(std::move(shape))}});
  };
  EXPECT_ERROR(infer({3}, {2, 4}), "operand dim 0 has size 3, the target needs 4");
  EXPECT_ERROR(infer({2, 3}, {3}), "lower rank");
  EXPECT_ERROR(infer({1}, {-1}), "negative dimension");
  EXPECT_ERROR(infer({0}, {2}), "cannot broadcast [0] to [2]");
}

// ---- slice -----------------------------------------------------------------------------------

Tensor slice1d(int64_t n, std::vector<int64_t> starts, std::vector<int64_t> ends,
               std::vector<int64_t> steps) {
  return run(OpKind::Slice, {seq(DType::I64, {n})},
             {{"starts", ints(std::move(starts))},
              {"ends", ints(std::move(ends))},
              {"steps", ints(std::move(steps))}});
}

TEST(OpsMovementSlice, OneDimensionalOnnxCases) {
  EXPECT_EQ(values(slice1d(10, {2}, {8}, {2})), std::vector<double>({2, 4, 6}));
  EXPECT_EQ(values(slice1d(10, {-3}, {kMax}, {})), std::vector<double>({7, 8, 9}));
  EXPECT_EQ(values(slice1d(10, {kMin}, {2}, {1})), std::vector<double>({0, 1}));
  EXPECT_EQ(values(slice1d(10, {0}, {kMax}, {3})), std::vector<double>({0, 3, 6, 9}));
  EXPECT_EQ(values(slice1d(10, {20}, {30}, {1})), std::vector<double>{});
  EXPECT_EQ(values(slice1d(10, {5}, {2}, {1})), std::vector<double>{});
  // Negative steps: starts clamp to dim-1, ends to -1 ("before the first element").
  EXPECT_EQ(values(slice1d(5, {-1}, {kMin}, {-1})), std::vector<double>({4, 3, 2, 1, 0}));
  EXPECT_EQ(values(slice1d(10, {8}, {0}, {-3})), std::vector<double>({8, 5, 2}));
  EXPECT_EQ(values(slice1d(10, {kMax}, {-8}, {-2})), std::vector<double>({9, 7, 5, 3}));
  EXPECT_EQ(values(slice1d(10, {2}, {5}, {-1})), std::vector<double>{});
  // Extreme steps take one element without overflowing.
  EXPECT_EQ(values(slice1d(10, {-1}, {kMin}, {kMin})), std::vector<double>({9}));
  EXPECT_EQ(values(slice1d(10, {1}, {kMax}, {kMax})), std::vector<double>({1}));
}

TEST(OpsMovementSlice, SeveralAxesNegativeAxesAndDefaults) {
  Tensor x = seq(DType::F32, {3, 4});
  // axes default to 0..n-1.
  Tensor a =
      run(OpKind::Slice, {x}, {{"starts", ints({1, 0})}, {"ends", ints({3, 4})}, {"steps", ints({1, 2})}});
  EXPECT_EQ(values(a), std::vector<double>({4, 6, 8, 10}));
  Tensor b = run(OpKind::Slice, {x}, {{"starts", ints({1})}, {"ends", ints({3})}, {"axes", ints({-1})}});
  ASSERT_EQ(b.shape(), Shape({3, 2}));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 2; ++j)
      EXPECT_EQ(b.getDouble(i * 2 + j), x.getDouble(i * 4 + 1 + j));
  // Both axes backwards, listed out of order: rows 2,1,0 and columns 3,1.
  Tensor c = run(OpKind::Slice, {x},
                 {{"starts", ints({-1, -1})},
                  {"ends", ints({kMin, kMin})},
                  {"axes", ints({1, 0})},
                  {"steps", ints({-2, -1})}});
  ASSERT_EQ(c.shape(), Shape({3, 2}));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 2; ++j)
      EXPECT_EQ(c.getDouble(i * 2 + j), x.getDouble((2 - i) * 4 + (3 - 2 * j)));
  Tensor empty = run(OpKind::Slice, {seq(DType::F32, {0, 3})},
                     {{"starts", ints({1})}, {"ends", ints({3})}, {"axes", ints({1})}});
  EXPECT_EQ(empty.shape(), Shape({0, 2}));
  // No starts at all slices nothing, rank 0 included.
  Tensor scalar =
      run(OpKind::Slice, {Tensor::scalar(DType::F32, 4)}, {{"starts", ints({})}, {"ends", ints({})}});
  EXPECT_EQ(values(scalar), std::vector<double>{4});
}

TEST(OpsMovementSlice, Errors) {
  auto infer = [](AttrMap attrs) {
    inferTypes(OpKind::Slice, {f32({3, 4})}, completeAttrs(OpKind::Slice, attrs));
  };
  EXPECT_ERROR(infer({{"starts", ints({0})}, {"ends", ints({2})}, {"steps", ints({0})}}), "step 0 on axis 0");
  EXPECT_ERROR(infer({{"starts", ints({0, 1})}, {"ends", ints({2})}}),
               "'starts' has 2 entries but 'ends' has 1");
  EXPECT_ERROR(infer({{"starts", ints({0})}, {"ends", ints({2})}, {"axes", ints({0, 1})}}), "'axes' has 2");
  EXPECT_ERROR(infer({{"starts", ints({0})}, {"ends", ints({2})}, {"steps", ints({1, 1})}}), "'steps' has 2");
  EXPECT_ERROR(infer({{"starts", ints({0, 0})}, {"ends", ints({2, 2})}, {"axes", ints({1, -1})}}),
               "appears twice");
  EXPECT_ERROR(infer({{"starts", ints({0})}, {"ends", ints({2})}, {"axes", ints({2})}}),
               "axis 2 is out of range");
  EXPECT_ERROR(infer({{"starts", ints({0, 0, 0})}, {"ends", ints({1, 1, 1})}}),
               "axis 2 is out of range for rank 2");
}

// ---- pad -------------------------------------------------------------------------------------

Tensor pad(const Tensor &x, std::vector<int64_t> pads, std::string mode = "constant", double value = 0) {
  return run(OpKind::Pad, {x}, {{"pads", ints(std::move(pads))}, {"mode", mode}, {"value", value}});
}
Tensor vec(std::vector<double> v) {
  return Tensor::fromDoubles(DType::F32, {static_cast<int64_t>(v.size())}, v);
}

TEST(OpsMovementPad, ConstantTwoDimensional) {
  Tensor x = seq(DType::F32, {2, 3});
  Tensor y = pad(x, {1, 0, 0, 2}, "constant", 9);
  ASSERT_EQ(y.shape(), Shape({3, 5}));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      bool inside = i >= 1 && j < 3;
      EXPECT_EQ(y.getDouble(i * 5 + j), inside ? x.getDouble((i - 1) * 3 + j) : 9.0) << i << "," << j;
    }
  // The default mode is constant with value 0; integer dtypes take the value exactly.
  Tensor d = run(OpKind::Pad, {vec({1, 2})}, {{"pads", ints({1, 1})}});
  EXPECT_EQ(values(d), std::vector<double>({0, 1, 2, 0}));
  Tensor i = pad(Tensor::fromDoubles(DType::I32, {2}, {5, 6}), {0, 2}, "constant", -7);
  EXPECT_EQ(values(i), std::vector<double>({5, 6, -7, -7}));
  EXPECT_EQ(values(pad(seq(DType::F32, {0}), {2, 1}, "constant", 5)), std::vector<double>({5, 5, 5}));
  EXPECT_EQ(values(pad(Tensor::scalar(DType::F32, 3), {})), std::vector<double>({3}));
}

TEST(OpsMovementPad, ReflectAndEdge) {
  EXPECT_EQ(values(pad(vec({1, 2, 3, 4}), {2, 1}, "reflect")), std::vector<double>({3, 2, 1, 2, 3, 4, 3}));
  EXPECT_EQ(values(pad(vec({1, 2, 3}), {2, 2}, "edge")), std::vector<double>({1, 1, 1, 2, 3, 3, 3}));
  Tensor grid = Tensor::fromDoubles(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(values(pad(grid, {1, 1, 1, 1}, "reflect")),
            std::vector<double>({5, 4, 5, 6, 5, 2, 1, 2, 3, 2, 5, 4, 5, 6, 5, 2, 1, 2, 3, 2}));
  EXPECT_EQ(values(pad(grid, {0, 1, 1, 0}, "edge")),
            std::vector<double>({1, 1, 2, 3, 4, 4, 5, 6, 4, 4, 5, 6}));
  // Axes of size 0 can be reflect- or edge-padded by nothing.
  EXPECT_EQ(pad(seq(DType::F32, {0, 2}), {0, 1, 0, 1}, "reflect").shape(), Shape({0, 4}));
  EXPECT_EQ(pad(seq(DType::F32, {0, 2}), {0, 1, 0, 0}, "edge").shape(), Shape({0, 3}));
}

TEST(OpsMovementPad, NegativePadsCropAsPadThenCrop) {
  Tensor x = vec({0, 1, 2, 3, 4, 5});
  EXPECT_EQ(values(pad(x, {-1, -2})), std::vector<double>({1, 2, 3}));
  EXPECT_EQ(values(pad(x, {-2, 2}, "edge")), std::vector<double>({2, 3, 4, 5, 5, 5}));
  // reflect [1,2,3,4] by 2 at the end is [1,2,3,4,3,2]; crop 1 at the front.
  EXPECT_EQ(values(pad(vec({1, 2, 3, 4}), {-1, 2}, "reflect")), std::vector<double>({2, 3, 4, 3, 2}));
  EXPECT_EQ(values(pad(x, {-6, 0})), std::vector<double>{});
  // Crops beyond the data leave only padding: [0..5, 7, 7, 7] minus its first 7 elements.
  EXPECT_EQ(values(pad(x, {-7, 3}, "constant", 7)), std::vector<double>({7, 7}));
  // 6 + INT64_MIN + INT64_MAX = 5 elements, all far past the end: the last element repeated.
  EXPECT_EQ(values(pad(x, {kMin, kMax}, "edge")), std::vector<double>(5, 5.0));
}

TEST(OpsMovementPad, Errors) {
  auto infer = [](Shape in, std::vector<int64_t> pads, std::string mode) {
    inferTypes(OpKind::Pad, {f32(std::move(in))},
               completeAttrs(OpKind::Pad, {{"pads", ints(std::move(pads))}, {"mode", mode}}));
  };
  EXPECT_ERROR(infer({2, 3}, {1, 1}, "constant"), "'pads' has 2 entries; rank 2 needs 4");
  EXPECT_ERROR(infer({3}, {3, 0}, "reflect"), "needs pads smaller than its size 3");
  EXPECT_ERROR(infer({3}, {0, 5}, "reflect"), "reflect padding");
  EXPECT_ERROR(infer({0}, {1, 0}, "edge"), "axis 0 of size 0");
  EXPECT_ERROR(infer({3}, {1, 0}, "wrap"), "unknown pad mode 'wrap'");
  EXPECT_ERROR(infer({3}, {-2, -2}, "constant"), "crop more than its 3 elements");
  EXPECT_ERROR(infer({3}, {kMax, kMax}, "constant"), "overflow");
}

// ---- concat and split ------------------------------------------------------------------------

TEST(OpsMovementConcat, JoinsAlongAnyAxisWithEmptyOperands) {
  Tensor a = Tensor::fromDoubles(DType::I64, {2, 1}, {10, 20});
  Tensor b = Tensor::fromDoubles(DType::I64, {2, 2}, {1, 2, 3, 4});
  Tensor none(DType::I64, {2, 0});
  for (int64_t axis : {1, -1}) {
    Tensor y = run(OpKind::Concat, {a, none, b}, {{"axis", int1(axis)}});
    ASSERT_EQ(y.type(), TensorType({DType::I64, {2, 3}}));
    EXPECT_EQ(values(y), std::vector<double>({10, 1, 2, 20, 3, 4}));
  }
  Tensor rows = run(OpKind::Concat, {vec({1}), vec({}), vec({2, 3})}, {{"axis", int1(0)}});
  EXPECT_EQ(values(rows), std::vector<double>({1, 2, 3}));
  EXPECT_EQ(values(run(OpKind::Concat, {vec({4, 5})}, {{"axis", int1(0)}})), std::vector<double>({4, 5}));
  // Middle axis: y[i][j][k] is a[i][j][k] for j < 1, else b[i][j-1][k].
  Tensor p = seq(DType::F32, {2, 1, 2}), q = seq(DType::F32, {2, 3, 2});
  Tensor y = run(OpKind::Concat, {p, q}, {{"axis", int1(1)}});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t k = 0; k < 2; ++k)
        EXPECT_EQ(y.getDouble((i * 4 + j) * 2 + k),
                  j < 1 ? p.getDouble(i * 2 + k) : q.getDouble((i * 3 + j - 1) * 2 + k));
}

TEST(OpsMovementConcat, Errors) {
  auto infer = [](std::vector<TensorType> in, int64_t axis) {
    inferTypes(OpKind::Concat, in, {{"axis", int1(axis)}});
  };
  EXPECT_ERROR(infer({f32({2}), {DType::I32, {2}}}, 0), "different dtypes f32 and i32");
  EXPECT_ERROR(infer({f32({2, 3}), f32({2, 4})}, 0),
               "operand 1 has shape [2,4], which differs from operand 0's [2,3] outside axis 0");
  EXPECT_ERROR(infer({f32({2, 3}), f32({2})}, 0), "operand 1 has shape [2]");
  EXPECT_ERROR(infer({f32({}), f32({})}, 0), "rank-0");
  EXPECT_ERROR(infer({f32({2}), f32({2})}, 1), "axis 1 is out of range for rank 1");
}

TEST(OpsMovementSplit, SeveralOutputsIncludingEmpty) {
  Tensor x = seq(DType::F32, {5, 2});
  EXPECT_EQ(inferTypes(OpKind::Split, {x.type()}, {{"axis", int1(0)}, {"sizes", ints({2, 0, 3})}}),
            (std::vector<TensorType>{f32({2, 2}), f32({0, 2}), f32({3, 2})}));
  std::vector<Tensor> parts = runAll(OpKind::Split, {x}, {{"sizes", ints({2, 0, 3})}}); // axis defaults to 0
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(values(parts[0]), std::vector<double>({0, 1, 2, 3}));
  EXPECT_EQ(parts[1].shape(), Shape({0, 2}));
  EXPECT_EQ(values(parts[2]), std::vector<double>({4, 5, 6, 7, 8, 9}));
  std::vector<Tensor> cols =
      runAll(OpKind::Split, {seq(DType::I32, {2, 3})}, {{"axis", int1(-1)}, {"sizes", ints({1, 2})}});
  ASSERT_EQ(cols.size(), 2u);
  EXPECT_EQ(values(cols[0]), std::vector<double>({0, 3}));
  EXPECT_EQ(values(cols[1]), std::vector<double>({1, 2, 4, 5}));
}

TEST(OpsMovementSplit, ConcatUndoesSplit) {
  Tensor x = randomTensor({DType::F64, {3, 7, 2}}, 42);
  std::vector<Tensor> parts = runAll(OpKind::Split, {x}, {{"axis", int1(1)}, {"sizes", ints({3, 0, 4})}});
  EXPECT_TRUE(run(OpKind::Concat, parts, {{"axis", int1(1)}}).identical(x));
}

TEST(OpsMovementSplit, Errors) {
  auto infer = [](Shape in, int64_t axis, std::vector<int64_t> sizes) {
    inferTypes(OpKind::Split, {f32(std::move(in))},
               {{"axis", int1(axis)}, {"sizes", ints(std::move(sizes))}});
  };
  EXPECT_ERROR(infer({5}, 0, {2, 2}), "must sum to 5");
  EXPECT_ERROR(infer({5}, 0, {6, -1}), "size 6 is outside [0, 5]");
  EXPECT_ERROR(infer({5}, 0, {-1, 6}), "size -1 is outside");
  EXPECT_ERROR(infer({5}, 0, {kMax, kMax}), "outside");
  EXPECT_ERROR(infer({5}, 0, {}), "'sizes' is empty");
  EXPECT_ERROR(infer({5}, -2, {5}), "axis -2 is out of range for rank 1");
  EXPECT_ERROR(infer({}, 0, {1}), "out of range for rank 0");
}

// ---- squeeze, unsqueeze, flatten (composites) ------------------------------------------------

/// The composite's decomposition must be exactly one reshape to `shape`.
void expectDecomposesToReshape(OpKind op, const TensorType &in, const AttrMap &attrs, const Shape &shape) {
  auto graph = decompositionGraph(op, {in}, attrs);
  std::vector<Node *> nodes = graph->nodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0]->op(), OpKind::Reshape);
  EXPECT_EQ(nodes[0]->attrInts("shape"), shape);
  verify(*graph);
}

TEST(OpsMovementSqueeze, DropsSizeOneDims) {
  Tensor x = seq(DType::F32, {1, 3, 1, 2});
  Tensor all = run(OpKind::Squeeze, {x}, {});
  EXPECT_EQ(all.shape(), Shape({3, 2}));
  EXPECT_EQ(values(all), values(x));
  EXPECT_EQ(run(OpKind::Squeeze, {x}, {{"axes", ints({-2})}}).shape(), Shape({1, 3, 2}));
  EXPECT_EQ(run(OpKind::Squeeze, {seq(DType::F32, {1, 1})}, {}).rank(), 0);
  EXPECT_EQ(run(OpKind::Squeeze, {seq(DType::F32, {0, 1})}, {}).shape(), Shape({0}));
  expectDecomposesToReshape(OpKind::Squeeze, x.type(), {{"axes", ints({0})}}, {3, 1, 2});
  EXPECT_ERROR(inferTypes(OpKind::Squeeze, {x.type()}, {{"axes", ints({1})}}),
               "cannot squeeze axis 1: it has size 3");
  EXPECT_ERROR(inferTypes(OpKind::Squeeze, {x.type()}, {{"axes", ints({0, -4})}}), "appears twice");
  EXPECT_ERROR(inferTypes(OpKind::Squeeze, {f32({})}, {{"axes", ints({0})}}), "out of range for rank 0");
}

TEST(OpsMovementUnsqueeze, InsertsOnesAtOutputPositions) {
  Tensor x = seq(DType::I64, {3, 2});
  Tensor y = run(OpKind::Unsqueeze, {x}, {{"axes", ints({0, -1})}});
  EXPECT_EQ(y.shape(), Shape({1, 3, 2, 1}));
  EXPECT_EQ(values(y), values(x));
  EXPECT_EQ(run(OpKind::Unsqueeze, {x}, {{"axes", ints({1})}}).shape(), Shape({3, 1, 2}));
  EXPECT_EQ(run(OpKind::Unsqueeze, {x}, {{"axes", ints({-2, 1})}}).shape(), Shape({3, 1, 1, 2}));
  EXPECT_EQ(values(run(OpKind::Unsqueeze, {Tensor::scalar(DType::F32, 2)}, {{"axes", ints({0})}})),
            std::vector<double>{2});
  expectDecomposesToReshape(OpKind::Unsqueeze, f32({0, 4}), {{"axes", ints({2})}}, {0, 4, 1});
  EXPECT_ERROR(inferTypes(OpKind::Unsqueeze, {x.type()}, {{"axes", ints({3})}}),
               "axis 3 is out of range for rank 3");
  EXPECT_ERROR(inferTypes(OpKind::Unsqueeze, {x.type()}, {{"axes", ints({0, -4})}}), "axis -4 appears twice");
}

TEST(OpsMovementFlatten, MergesARangeOfDims) {
  Tensor x = seq(DType::F32, {2, 3, 4});
  Tensor all = run(OpKind::Flatten, {x}, {});
  EXPECT_EQ(all.shape(), Shape({24}));
  EXPECT_EQ(values(all), values(x));
  auto shapeOf = [](Shape in, int64_t start, int64_t end) {
    return inferTypes(OpKind::Flatten, {f32(std::move(in))}, {{"start", int1(start)}, {"end", int1(end)}})[0]
        .shape;
  };
  EXPECT_EQ(shapeOf({2, 3, 4}, 1, -1), Shape({2, 12}));
  EXPECT_EQ(shapeOf({2, 3, 4}, 0, 1), Shape({6, 4}));
  EXPECT_EQ(shapeOf({2, 3, 4}, -2, -2), Shape({2, 3, 4}));
  EXPECT_EQ(shapeOf({2, 0, 3}, 1, 2), Shape({2, 0}));
  EXPECT_EQ(shapeOf({}, 0, -1), Shape({1}));
  EXPECT_EQ(values(run(OpKind::Flatten, {Tensor::scalar(DType::F32, 6)}, {})), std::vector<double>{6});
  expectDecomposesToReshape(OpKind::Flatten, x.type(), {{"start", int1(1)}}, {2, 12});
  EXPECT_ERROR(shapeOf({2, 3, 4}, 2, 1), "start 2 comes after end 1");
  EXPECT_ERROR(shapeOf({2, 3}, 0, 2), "end: axis 2 is out of range for rank 2");
  EXPECT_ERROR(shapeOf({}, 1, -1), "start: axis 1 is out of range for rank 1");
}
