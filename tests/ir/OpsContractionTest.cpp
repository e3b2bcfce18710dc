// matmul and conv: inference and reference evaluation, checked against naive loops written here
// from the definitions (numpy matmul, ONNX Conv). Pooling is in OpsPoolingTest.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/Verifier.h"
#include "tests/ir/OpTestUtil.h"

using namespace kiln;
using namespace kiln::ir;
using namespace kiln::test;

namespace {

// ---- matmul -----------------------------------------------------------------------------------

// out[i,j] = sum_k a[i,k] b[k,j] for row-major matrices starting at the given offsets.
void naiveMatMul(const Tensor &a, int64_t aOff, const Tensor &b, int64_t bOff, Tensor &out, int64_t outOff,
                 int64_t m, int64_t k, int64_t n) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += a.getDouble(aOff + i * k + p) * b.getDouble(bOff + p * n + j);
      out.setDouble(outOff + i * n + j, sum);
    }
}

TEST(OpsContractionMatMul, TwoDimensionalAgainstNaiveLoop) {
  Tensor a = randomTensor({DType::F64, {3, 5}}, 1), b = randomTensor({DType::F64, {5, 4}}, 2);
  Tensor want(DType::F64, {3, 4});
  naiveMatMul(a, 0, b, 0, want, 0, 3, 5, 4);
  EXPECT_TRUE(near(runOp(OpKind::MatMul, {a, b}), want, 1e-12));

  Tensor af = randomTensor({DType::F32, {7, 9}}, 3), bf = randomTensor({DType::F32, {9, 2}}, 4);
  Tensor wantf(DType::F32, {7, 2});
  naiveMatMul(af, 0, bf, 0, wantf, 0, 7, 9, 2);
  EXPECT_TRUE(near(runOp(OpKind::MatMul, {af, bf}), wantf, 1e-6));
}

TEST(OpsContractionMatMul, OneDimensionalOperandsArePromotedAndSqueezed) {
  Tensor v = tensorOf(DType::F32, {3}, {1, 2, 3});
  Tensor w = tensorOf(DType::F32, {3}, {4, 5, 6});
  Tensor dot = runOp(OpKind::MatMul, {v, w});
  EXPECT_EQ(dot.shape(), Shape{});
  EXPECT_DOUBLE_EQ(dot.getDouble(0), 32);

  Tensor m = tensorOf(DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor vm = runOp(OpKind::MatMul, {v, m}); // [3] x [3,2] -> [2]
  EXPECT_TRUE(near(vm, tensorOf(DType::F32, {2}, {22, 28}), 0));
  Tensor mt = tensorOf(DType::F32, {2, 3}, {1, 3, 5, 2, 4, 6});
  Tensor mv = runOp(OpKind::MatMul, {mt, v}); // [2,3] x [3] -> [2]
  EXPECT_TRUE(near(mv, tensorOf(DType::F32, {2}, {22, 28}), 0));

  // A vector against a batch of matrices keeps the batch: [3] x [2,3,2] -> [2,2].
  Tensor batch = randomTensor({DType::F64, {2, 3, 2}}, 5);
  Tensor want(DType::F64, {2, 2});
  for (int64_t i = 0; i < 2; ++i)
    naiveMatMul(tensorOf(DType::F64, {3}, {1, 2, 3}), 0, batch, i * 6, want, i * 2, 1, 3, 2);
  Tensor v64 = tensorOf(DType::F64, {3}, {1, 2, 3});
  EXPECT_TRUE(near(runOp(OpKind::MatMul, {v64, batch}), want, 1e-12));
  EXPECT_EQ(inferOne(OpKind::MatMul, {{DType::F32, {4, 3, 5}}, {DType::F32, {5}}}).shape, (Shape{4, 3}));
}

TEST(OpsContractionMatMul, BatchedAndBroadcastBatch) {
  Tensor a = randomTensor({DType::F64, {2, 3, 4}}, 6), b = randomTensor({DType::F64, {2, 4, 5}}, 7);
  Tensor want(DType::F64, {2, 3, 5});
  for (int64_t i = 0; i < 2; ++i)
    naiveMatMul(a, i * 12, b, i * 20, want, i * 15, 3, 4, 5);
  EXPECT_TRUE(near(runOp(OpKind::MatMul, {a, b}), want, 1e-12));

  // [2,1,3,4] x [3,4,5] -> [2,3,3,5]: a's size-1 batch dim and b's missing one both broadcast.
  Tensor c = randomTensor({DType::F64, {2, 1, 3, 4}}, 8), d = randomTensor({DType::F64, {3, 4, 5}}, 9);
  Tensor want2(DType::F64, {2, 3, 3, 5});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      naiveMatMul(c, i * 12, d, j * 20, want2, (i * 3 + j) * 15, 3, 4, 5);
  EXPECT_TRUE(near(runOp(OpKind::MatMul, {c, d}), want2, 1e-12));
}

TEST(OpsContractionMatMul, IntegersAreExact) {
  Tensor a = tensorOf(DType::I64, {2, 2}, {1, 2, 3, 4}), b = tensorOf(DType::I64, {2, 2}, {5, 6, 7, 8});
  Tensor got = runOp(OpKind::MatMul, {a, b});
  EXPECT_EQ(got.dtype(), DType::I64);
  EXPECT_TRUE(got.identical(tensorOf(DType::I64, {2, 2}, {19, 22, 43, 50})));
  // Values above 2^53 would lose precision if the evaluator went through double.
  int64_t big = (int64_t(1) << 53) + 1;
  Tensor x = Tensor(DType::I64, {1, 1}), y = tensorOf(DType::I64, {1, 1}, {3});
  x.setInt(0, big);
  EXPECT_EQ(runOp(OpKind::MatMul, {x, y}).getInt(0), big * 3);
  Tensor i32 =
      runOp(OpKind::MatMul, {tensorOf(DType::I32, {3}, {-1, 2, 3}), tensorOf(DType::I32, {3}, {4, 5, -6})});
  EXPECT_EQ(i32.dtype(), DType::I32);
  EXPECT_EQ(i32.getInt(0), -4 + 10 - 18);
}

TEST(OpsContractionMatMul, EmptyDims) {
  // An empty inner dim sums nothing: zeros.
  Tensor z = runOp(OpKind::MatMul, {Tensor(DType::F32, {2, 0}), Tensor(DType::F32, {0, 3})});
  EXPECT_TRUE(z.identical(Tensor(DType::F32, {2, 3})));
  EXPECT_EQ(runOp(OpKind::MatMul, {Tensor(DType::F32, {0, 4}), Tensor(DType::F32, {4, 3})}).shape(),
            (Shape{0, 3}));
  EXPECT_EQ(inferOne(OpKind::MatMul, {{DType::F32, {0, 2, 4}}, {DType::F32, {1, 4, 3}}}).shape,
            (Shape{0, 2, 3}));
}

TEST(OpsContractionMatMul, Errors) {
  expectError([] { inferOne(OpKind::MatMul, {{DType::F32, {2, 3}}, {DType::F32, {4, 5}}}); }, "[2,3]");
  expectError([] { inferOne(OpKind::MatMul, {{DType::F32, {2, 3}}, {DType::F32, {4, 5}}}); }, "[4,5]");
  expectError([] { inferOne(OpKind::MatMul, {{DType::F32, {2, 3}}, {DType::F32, {4, 5}}}); }, "inner");
  expectError([] { inferOne(OpKind::MatMul, {{DType::F32, {2, 2, 3}}, {DType::F32, {3, 3, 4}}}); }, "batch");
  expectError([] { inferOne(OpKind::MatMul, {{DType::F32, {}}, {DType::F32, {3}}}); }, "rank");
  expectError([] { inferOne(OpKind::MatMul, {{DType::F32, {2, 3}}, {DType::F64, {3, 2}}}); }, "dtype");
  expectError([] { inferOne(OpKind::MatMul, {{DType::Bool, {2, 3}}, {DType::Bool, {3, 2}}}); }, "bool");
  expectError([] { inferOne(OpKind::MatMul, {{DType::F32, {2, 3}}}); }, "expects 2 inputs");
}

// ---- conv -------------------------------------------------------------------------------------

struct ConvParams {
  std::vector<int64_t> strides, pads, dilations;
  int64_t groups = 1;
  AttrMap attrs() const {
    return {{"strides", strides}, {"pads", pads}, {"dilations", dilations}, {"groups", groups}};
  }
};

// Straight from the definition, for any spatial rank: every output element sums over its group's
// input channels and every kernel offset whose input position is inside the unpadded input.
Tensor naiveConv(const Tensor &x, const Tensor &w, const ConvParams &p) {
  size_t sr = x.shape().size() - 2;
  int64_t cin = x.shape()[1], cout = w.shape()[0], perGroupIn = cin / p.groups, perGroupOut = cout / p.groups;
  Shape outShape = {x.shape()[0], cout};
  for (size_t d = 0; d < sr; ++d) {
    int64_t span = p.dilations[d] * (w.shape()[2 + d] - 1) + 1;
    outShape.push_back((x.shape()[2 + d] + p.pads[d] + p.pads[sr + d] - span) / p.strides[d] + 1);
  }
  Tensor out(x.dtype(), outShape);
  Shape kernel(w.shape().begin() + 2, w.shape().end());
  auto idx = [](const std::vector<int64_t> &i, const Shape &s) {
    int64_t f = 0;
    for (size_t d = 0; d < s.size(); ++d)
      f = f * s[d] + i[d];
    return f;
  };
  for (int64_t flat = 0; flat < out.numElements(); ++flat) {
    std::vector<int64_t> o(outShape.size());
    for (int64_t r = flat, d = static_cast<int64_t>(o.size()) - 1; d >= 0; --d) {
      o[d] = r % outShape[d];
      r /= outShape[d];
    }
    int64_t n = o[0], co = o[1], g = co / perGroupOut;
    double sum = 0;
    for (int64_t ci = 0; ci < perGroupIn; ++ci)
      for (int64_t kflat = 0; kflat < numElements(kernel); ++kflat) {
        std::vector<int64_t> k(sr), xi = {n, g * perGroupIn + ci}, wi = {co, ci};
        bool inside = true;
        for (int64_t r = kflat, d = static_cast<int64_t>(sr) - 1; d >= 0; --d) {
          k[d] = r % kernel[d];
          r /= kernel[d];
        }
        for (size_t d = 0; d < sr; ++d) {
          int64_t pos = o[2 + d] * p.strides[d] - p.pads[d] + k[d] * p.dilations[d];
          inside = inside && pos >= 0 && pos < x.shape()[2 + d];
          xi.push_back(pos);
          wi.push_back(k[d]);
        }
        if (inside)
          sum += x.getDouble(idx(xi, x.shape())) * w.getDouble(idx(wi, w.shape()));
      }
    out.setDouble(flat, sum);
  }
  return out;
}

void checkConv(const Shape &xShape, const Shape &wShape, const ConvParams &p, uint64_t seed) {
  Tensor x = randomTensor({DType::F64, xShape}, seed), w = randomTensor({DType::F64, wShape}, seed + 100);
  Tensor want = naiveConv(x, w, p);
  Tensor got = runOp(OpKind::Conv, {x, w}, p.attrs());
  EXPECT_TRUE(near(got, want, 1e-12)) << "x " << shapeToString(xShape) << " w " << shapeToString(wShape);
}

TEST(OpsContractionConv, HandComputed1D) {
  // [1,2,3] * [1,1] -> [3,5]; with one pad each side -> [1,3,5,3].
  Tensor x = tensorOf(DType::F32, {1, 1, 3}, {1, 2, 3}), w = tensorOf(DType::F32, {1, 1, 2}, {1, 1});
  EXPECT_TRUE(near(runOp(OpKind::Conv, {x, w}), tensorOf(DType::F32, {1, 1, 2}, {3, 5}), 0));
  EXPECT_TRUE(near(runOp(OpKind::Conv, {x, w}, {{"pads", std::vector<int64_t>{1, 1}}}),
                   tensorOf(DType::F32, {1, 1, 4}, {1, 3, 5, 3}), 0));
}

TEST(OpsContractionConv, OneDimensional) {
  checkConv({2, 3, 11}, {4, 3, 3}, {{1}, {0, 0}, {1}, 1}, 1);
  checkConv({2, 4, 9}, {6, 2, 3}, {{2}, {1, 2}, {2}, 2}, 2);
}

TEST(OpsContractionConv, TwoDimensionalStridePaddingDilation) {
  checkConv({1, 3, 7, 6}, {4, 3, 3, 2}, {{2, 1}, {1, 0, 2, 1}, {1, 2}, 1}, 3);
  checkConv({2, 2, 5, 5}, {3, 2, 3, 3}, {{1, 1}, {1, 1, 1, 1}, {1, 1}, 1}, 4);
  checkConv({1, 6, 8, 7}, {4, 3, 2, 3}, {{3, 2}, {0, 2, 1, 0}, {2, 1}, 2}, 5);
}

TEST(OpsContractionConv, DepthwiseAndThreeDimensional) {
  checkConv({2, 4, 5, 5}, {4, 1, 3, 3}, {{1, 1}, {1, 1, 1, 1}, {1, 1}, 4}, 6);
  checkConv({1, 3, 6, 6}, {6, 1, 3, 3}, {{2, 2}, {1, 1, 1, 1}, {1, 1}, 3}, 7); // channel multiplier 2
  checkConv({1, 2, 4, 5, 3}, {3, 2, 2, 3, 1}, {{1, 2, 1}, {0, 1, 0, 1, 0, 0}, {1, 1, 2}, 1}, 8);
}

TEST(OpsContractionConv, DefaultsAndEmptyBatch) {
  EXPECT_EQ(inferOne(OpKind::Conv, {{DType::F32, {1, 3, 8, 8}}, {DType::F32, {5, 3, 3, 3}}}).shape,
            (Shape{1, 5, 6, 6}));
  Tensor got = runOp(OpKind::Conv, {Tensor(DType::F32, {0, 2, 4}), Tensor(DType::F32, {3, 2, 2})});
  EXPECT_EQ(got.shape(), (Shape{0, 3, 3}));
  // f32 in, f32 out, accumulated in double.
  Tensor x = randomTensor({DType::F32, {1, 2, 6, 6}}, 9), w = randomTensor({DType::F32, {2, 2, 3, 3}}, 10);
  ConvParams p{{1, 1}, {0, 0, 0, 0}, {1, 1}, 1};
  EXPECT_TRUE(near(runOp(OpKind::Conv, {x, w}, p.attrs()), naiveConv(x, w, p), 1e-6));
}

TEST(OpsContractionConv, Errors) {
  TensorType x{DType::F32, {1, 3, 5, 5}};
  expectError(
      [&] {
        inferOne(OpKind::Conv, {x, {DType::F32, {4, 3, 3, 3}}}, {{"groups", int64_t(2)}});
      },
      "groups 2 must divide");
  expectError([&] { inferOne(OpKind::Conv, {x, {DType::F32, {4, 2, 3, 3}}}); }, "C/groups = 3");
  expectError([&] { inferOne(OpKind::Conv, {x, {DType::F32, {4, 3, 6, 3}}}); }, "output size would be < 1");
  expectError(
      [&] {
        inferOne(OpKind::Conv, {x, {DType::F32, {4, 3, 3, 3}}}, {{"dilations", std::vector<int64_t>{3, 1}}});
      },
      "output size would be < 1");
  expectError(
      [&] {
        inferOne(OpKind::Conv, {x, {DType::F32, {4, 3, 3, 3}}}, {{"pads", std::vector<int64_t>{1, 1}}});
      },
      "'pads' needs 4 values");
  expectError(
      [&] {
        inferOne(OpKind::Conv, {x, {DType::F32, {4, 3, 3, 3}}}, {{"strides", std::vector<int64_t>{0, 1}}});
      },
      "'strides' values must be >= 1");
  expectError([&] { inferOne(OpKind::Conv, {x, {DType::F32, {4, 3, 3}}}); }, "rank");
  expectError([] { inferOne(OpKind::Conv, {{DType::F32, {3, 5}}, {DType::F32, {3, 5}}}); }, "spatial");
  expectError([] { inferOne(OpKind::Conv, {{DType::I32, {1, 1, 5}}, {DType::I32, {1, 1, 2}}}); }, "floating");
  expectError(
      [&] {
        inferOne(OpKind::Conv, {x, {DType::F32, {4, 3, 3, 3}}}, {{"groups", int64_t(0)}});
      },
      "'groups' must be >= 1");
  expectError(
      [&] {
        inferOne(OpKind::Conv, {x, {DType::F32, {4, 3, 3, 3}}},
                 {{"dilations", std::vector<int64_t>{int64_t(1) << 62, 1}}});
      },
      "overflows");
}

} // namespace
