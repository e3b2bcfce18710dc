// matmul, conv, max_pool and avg_pool: inference and reference evaluation, checked against
// naive loops written here from the definitions (numpy matmul, ONNX Conv/MaxPool/AveragePool).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "ir/Builder.h"
#include "ir/Error.h"
#include "ir/Evaluator.h"
#include "ir/Verifier.h"

using namespace kiln;
using namespace kiln::ir;

namespace {

// Builds a one-op graph, verifies it and evaluates it.
Tensor runOp(OpKind op, const std::vector<Tensor> &inputs, AttrMap attrs = {}) {
  Graph g("test");
  std::vector<Value *> args;
  for (const Tensor &t : inputs)
    args.push_back(g.addInput(t.type()));
  Builder b(g);
  g.setOutputs({b.create(op, args, std::move(attrs))});
  verify(g);
  return evaluate(g, inputs)[0];
}

TensorType inferOne(OpKind op, const std::vector<TensorType> &types, AttrMap attrs = {}) {
  return inferTypes(op, types, completeAttrs(op, std::move(attrs)))[0];
}

void expectError(const std::function<void()> &fn, const std::string &fragment) {
  try {
    fn();
    ADD_FAILURE() << "expected a kiln::Error mentioning '" << fragment << "'";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

::testing::AssertionResult near(const Tensor &got, const Tensor &want, double tol) {
  Comparison c = compareTensors(got, want, tol, tol);
  if (c.ok)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << c.message;
}

Tensor values(DType dtype, Shape shape, std::vector<double> v) {
  return Tensor::fromDoubles(dtype, shape, v);
}

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
  Tensor v = values(DType::F32, {3}, {1, 2, 3});
  Tensor w = values(DType::F32, {3}, {4, 5, 6});
  Tensor dot = runOp(OpKind::MatMul, {v, w});
  EXPECT_EQ(dot.shape(), Shape{});
  EXPECT_DOUBLE_EQ(dot.getDouble(0), 32);

  Tensor m = values(DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor vm = runOp(OpKind::MatMul, {v, m}); // [3] x [3,2] -> [2]
  EXPECT_TRUE(near(vm, values(DType::F32, {2}, {22, 28}), 0));
  Tensor mt = values(DType::F32, {2, 3}, {1, 3, 5, 2, 4, 6});
  Tensor mv = runOp(OpKind::MatMul, {mt, v}); // [2,3] x [3] -> [2]
  EXPECT_TRUE(near(mv, values(DType::F32, {2}, {22, 28}), 0));

  // A vector against a batch of matrices keeps the batch: [3] x [2,3,2] -> [2,2].
  Tensor batch = randomTensor({DType::F64, {2, 3, 2}}, 5);
  Tensor want(DType::F64, {2, 2});
  for (int64_t i = 0; i < 2; ++i)
    naiveMatMul(values(DType::F64, {3}, {1, 2, 3}), 0, batch, i * 6, want, i * 2, 1, 3, 2);
  Tensor v64 = values(DType::F64, {3}, {1, 2, 3});
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
  Tensor a = values(DType::I64, {2, 2}, {1, 2, 3, 4}), b = values(DType::I64, {2, 2}, {5, 6, 7, 8});
  Tensor got = runOp(OpKind::MatMul, {a, b});
  EXPECT_EQ(got.dtype(), DType::I64);
  EXPECT_TRUE(got.identical(values(DType::I64, {2, 2}, {19, 22, 43, 50})));
  // Values above 2^53 would lose precision if the evaluator went through double.
  int64_t big = (int64_t(1) << 53) + 1;
  Tensor x = Tensor(DType::I64, {1, 1}), y = values(DType::I64, {1, 1}, {3});
  x.setInt(0, big);
  EXPECT_EQ(runOp(OpKind::MatMul, {x, y}).getInt(0), big * 3);
  Tensor i32 =
      runOp(OpKind::MatMul, {values(DType::I32, {3}, {-1, 2, 3}), values(DType::I32, {3}, {4, 5, -6})});
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
  Tensor x = values(DType::F32, {1, 1, 3}, {1, 2, 3}), w = values(DType::F32, {1, 1, 2}, {1, 1});
  EXPECT_TRUE(near(runOp(OpKind::Conv, {x, w}), values(DType::F32, {1, 1, 2}, {3, 5}), 0));
  EXPECT_TRUE(near(runOp(OpKind::Conv, {x, w}, {{"pads", std::vector<int64_t>{1, 1}}}),
                   values(DType::F32, {1, 1, 4}, {1, 3, 5, 3}), 0));
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

// ---- pooling ----------------------------------------------------------------------------------

AttrMap poolAttrs(std::vector<int64_t> kernel, std::vector<int64_t> strides = {},
                  std::vector<int64_t> pads = {}, int64_t ceilMode = 0) {
  return {{"kernel", kernel}, {"strides", strides}, {"pads", pads}, {"ceil_mode", ceilMode}};
}

Tensor seq(DType dtype, Shape shape, std::vector<double> v) {
  return values(dtype, std::move(shape), std::move(v));
}

TEST(OpsContractionPool, MaxPoolCeilModeAddsAndDropsWindows) {
  Tensor x = seq(DType::F32, {1, 1, 5}, {1, 3, 2, 5, 4});
  EXPECT_TRUE(near(runOp(OpKind::MaxPool, {x}, poolAttrs({2}, {2})), seq(DType::F32, {1, 1, 2}, {3, 5}), 0));
  // ceil_mode keeps the partial window [4] at the end.
  EXPECT_TRUE(near(runOp(OpKind::MaxPool, {x}, poolAttrs({2}, {2}, {}, 1)),
                   seq(DType::F32, {1, 1, 3}, {3, 5, 4}), 0));
  // Pads 1+1: ceil((5+2-2)/2)+1 = 4 windows, but the 4th would start at padded index 6, inside the
  // right padding, so it is dropped: windows [pad,1] [3,2] [5,4].
  EXPECT_TRUE(near(runOp(OpKind::MaxPool, {x}, poolAttrs({2}, {2}, {1, 1}, 1)),
                   seq(DType::F32, {1, 1, 3}, {1, 3, 5}), 0));
}

TEST(OpsContractionPool, PaddingNeverWinsAMax) {
  Tensor x = seq(DType::F32, {1, 1, 3}, {-3, -1, -2});
  EXPECT_TRUE(near(runOp(OpKind::MaxPool, {x}, poolAttrs({2}, {1}, {1, 1})),
                   seq(DType::F32, {1, 1, 4}, {-3, -1, -1, -2}), 0));
  // A window over padding only has no maximum: -inf (lowest for integers), never 0.
  Tensor one = seq(DType::F32, {1, 1, 1}, {-5});
  Tensor got = runOp(OpKind::MaxPool, {one}, poolAttrs({1}, {1}, {1, 1}));
  EXPECT_EQ(got.getDouble(0), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(got.getDouble(1), -5);
  Tensor gotInt = runOp(OpKind::MaxPool, {seq(DType::I32, {1, 1, 1}, {-5})}, poolAttrs({1}, {1}, {1, 1}));
  EXPECT_EQ(gotInt.getInt(0), std::numeric_limits<int32_t>::min());
}

TEST(OpsContractionPool, MaxPoolPropagatesNaN) {
  Tensor x = seq(DType::F32, {1, 1, 4}, {1, NAN, 2, 3});
  Tensor got = runOp(OpKind::MaxPool, {x}, poolAttrs({2}, {1}));
  EXPECT_TRUE(std::isnan(got.getDouble(0)));
  EXPECT_TRUE(std::isnan(got.getDouble(1)));
  EXPECT_EQ(got.getDouble(2), 3);
}

TEST(OpsContractionPool, MaxPoolDilationAndIntegers) {
  Tensor x = seq(DType::I64, {1, 1, 7}, {5, 1, 0, 7, 2, 3, 6});
  AttrMap attrs = poolAttrs({3});
  attrs["dilations"] = std::vector<int64_t>{2};
  // Windows {0,2,4} {1,3,5} {2,4,6}.
  EXPECT_TRUE(runOp(OpKind::MaxPool, {x}, attrs).identical(seq(DType::I64, {1, 1, 3}, {5, 7, 6})));
}

TEST(OpsContractionPool, AvgPoolPadsAndCountIncludePad) {
  Tensor x = seq(DType::F64, {1, 1, 3}, {1, 2, 3});
  AttrMap attrs = poolAttrs({2}, {1}, {1, 1});
  EXPECT_TRUE(near(runOp(OpKind::AvgPool, {x}, attrs), seq(DType::F64, {1, 1, 4}, {1, 1.5, 2.5, 3}), 1e-15));
  attrs["count_include_pad"] = int64_t(1);
  EXPECT_TRUE(
      near(runOp(OpKind::AvgPool, {x}, attrs), seq(DType::F64, {1, 1, 4}, {0.5, 1.5, 2.5, 1.5}), 1e-15));

  // ceil_mode: the last window [3, pad, beyond] reaches past the padded extent; with
  // count_include_pad it counts the one pad position inside the extent, not the one beyond.
  Tensor y = seq(DType::F64, {1, 1, 4}, {1, 2, 3, 4});
  AttrMap ceil = poolAttrs({3}, {2}, {1, 1}, 1);
  EXPECT_TRUE(near(runOp(OpKind::AvgPool, {y}, ceil), seq(DType::F64, {1, 1, 3}, {1.5, 3, 4}), 1e-15));
  ceil["count_include_pad"] = int64_t(1);
  EXPECT_TRUE(near(runOp(OpKind::AvgPool, {y}, ceil), seq(DType::F64, {1, 1, 3}, {1, 3, 2}), 1e-15));

  // A window over padding only: an empty mean (NaN), or 0 when pads count.
  Tensor one = seq(DType::F32, {1, 1, 1}, {5});
  Tensor empty = runOp(OpKind::AvgPool, {one}, poolAttrs({1}, {1}, {1, 1}));
  EXPECT_TRUE(std::isnan(empty.getDouble(0)));
  EXPECT_EQ(empty.getDouble(1), 5);
  AttrMap include = poolAttrs({1}, {1}, {1, 1});
  include["count_include_pad"] = int64_t(1);
  EXPECT_TRUE(near(runOp(OpKind::AvgPool, {one}, include), seq(DType::F32, {1, 1, 3}, {0, 5, 0}), 0));
}

// 2-D pooling written the PyTorch way: window start/end clipped to the padded extent, then to
// the input; the max over real positions only.
struct Pool2D {
  int64_t kh, kw, sh, sw, pt, pl, pb, pr, dh = 1, dw = 1;
  bool ceilMode = false, countIncludePad = false;
  int64_t outSize(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d) const {
    double exact = double(in + p0 + p1 - d * (k - 1) - 1) / double(s);
    int64_t out = int64_t(ceilMode ? std::ceil(exact) : std::floor(exact)) + 1;
    if (ceilMode && (out - 1) * s >= in + p0)
      --out;
    return out;
  }
};

Tensor naivePool2D(const Tensor &x, const Pool2D &p, bool isMax) {
  int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  int64_t oh = p.outSize(h, p.kh, p.sh, p.pt, p.pb, p.dh), ow = p.outSize(w, p.kw, p.sw, p.pl, p.pr, p.dw);
  Tensor out(x.dtype(), {n, c, oh, ow});
  int64_t flat = 0;
  for (int64_t plane = 0; plane < n * c; ++plane)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j, ++flat) {
        int64_t h0 = i * p.sh - p.pt, w0 = j * p.sw - p.pl;
        double best = -INFINITY, sum = 0;
        int64_t real = 0;
        for (int64_t a = 0; a < p.kh; ++a)
          for (int64_t b = 0; b < p.kw; ++b) {
            int64_t y = h0 + a * p.dh, z = w0 + b * p.dw;
            if (y < 0 || y >= h || z < 0 || z >= w)
              continue;
            double v = x.getDouble((plane * h + y) * w + z);
            best = std::max(best, v);
            sum += v;
            ++real;
          }
        int64_t hEnd = std::min(h0 + p.kh, h + p.pb), wEnd = std::min(w0 + p.kw, w + p.pr);
        int64_t padded = (hEnd - h0) * (wEnd - w0);
        out.setDouble(flat, isMax ? best : sum / double(p.countIncludePad ? padded : real));
      }
  return out;
}

AttrMap pool2DAttrs(const Pool2D &p, bool isMax) {
  AttrMap attrs = poolAttrs({p.kh, p.kw}, {p.sh, p.sw}, {p.pt, p.pl, p.pb, p.pr}, p.ceilMode);
  if (isMax)
    attrs["dilations"] = std::vector<int64_t>{p.dh, p.dw};
  else
    attrs["count_include_pad"] = int64_t(p.countIncludePad);
  return attrs;
}

TEST(OpsContractionPool, TwoDimensionalAgainstNaiveLoop) {
  Tensor x = randomTensor({DType::F64, {2, 3, 9, 8}}, 11);
  std::vector<Pool2D> cases = {
      {3, 3, 2, 2, 1, 1, 1, 1},                  // ResNet's stem pool
      {2, 3, 2, 1, 0, 1, 1, 0, 1, 1, true},      // ceil_mode, asymmetric pads
      {3, 2, 3, 2, 1, 0, 1, 1, 1, 1, true, true} // ceil_mode with count_include_pad
  };
  for (const Pool2D &p : cases) {
    EXPECT_TRUE(near(runOp(OpKind::MaxPool, {x}, pool2DAttrs(p, true)), naivePool2D(x, p, true), 0));
    EXPECT_TRUE(near(runOp(OpKind::AvgPool, {x}, pool2DAttrs(p, false)), naivePool2D(x, p, false), 1e-14));
  }
  Pool2D dilated{2, 3, 1, 2, 1, 1, 0, 1, 2, 2, true};
  EXPECT_TRUE(
      near(runOp(OpKind::MaxPool, {x}, pool2DAttrs(dilated, true)), naivePool2D(x, dilated, true), 0));
  // Global average pooling, as at the end of ResNet.
  Tensor global = runOp(OpKind::AvgPool, {x}, poolAttrs({9, 8}));
  ASSERT_EQ(global.shape(), (Shape{2, 3, 1, 1}));
  double sum = 0;
  for (int64_t i = 0; i < 72; ++i)
    sum += x.getDouble(i);
  EXPECT_NEAR(global.getDouble(0), sum / 72, 1e-14);
}

TEST(OpsContractionPool, ThreeDimensionalAndEmptyBatch) {
  Tensor x = randomTensor({DType::F32, {1, 1, 2, 2, 2}}, 12);
  Tensor got = runOp(OpKind::MaxPool, {x}, poolAttrs({2, 2, 2}));
  double best = -INFINITY;
  for (int64_t i = 0; i < 8; ++i)
    best = std::max(best, x.getDouble(i));
  EXPECT_EQ(got.shape(), (Shape{1, 1, 1, 1, 1}));
  EXPECT_EQ(got.getDouble(0), best);
  EXPECT_EQ(runOp(OpKind::AvgPool, {Tensor(DType::F32, {0, 3, 4})}, poolAttrs({2})).shape(),
            (Shape{0, 3, 3}));
}

TEST(OpsContractionPool, HugeWindowsCostNothingExtra) {
  // A 2^40-tap kernel over 2^40 pads each side with stride 2^40: two windows, the first over
  // padding only, the second over the whole input. The evaluator must not walk the taps.
  int64_t huge = int64_t(1) << 40;
  Tensor x = seq(DType::F64, {1, 1, 3}, {4, 9, 2});
  AttrMap attrs = poolAttrs({huge}, {huge}, {huge, huge});
  Tensor got = runOp(OpKind::MaxPool, {x}, attrs);
  EXPECT_TRUE(got.identical(seq(DType::F64, {1, 1, 2}, {-INFINITY, 9})));
  attrs["count_include_pad"] = int64_t(1);
  Tensor avg = runOp(OpKind::AvgPool, {x}, attrs);
  EXPECT_EQ(avg.getDouble(0), 0);
  EXPECT_DOUBLE_EQ(avg.getDouble(1), 15 / double(huge));
}

TEST(OpsContractionPool, Errors) {
  TensorType x{DType::F32, {1, 2, 4, 4}};
  expectError([&] { inferOne(OpKind::MaxPool, {x}); }, "missing required attribute 'kernel'");
  expectError([&] { inferOne(OpKind::MaxPool, {x}, poolAttrs({2})); }, "'kernel' needs 2 values");
  expectError([&] { inferOne(OpKind::AvgPool, {x}, poolAttrs({5, 2})); }, "output size would be < 1");
  expectError([&] { inferOne(OpKind::MaxPool, {x}, poolAttrs({2, 2}, {1, 1}, {1, 1})); }, "'pads' needs 4");
  expectError([&] { inferOne(OpKind::MaxPool, {x}, poolAttrs({2, 0})); }, "'kernel' values must be >= 1");
  expectError([] { inferOne(OpKind::AvgPool, {{DType::I32, {1, 1, 4}}}, poolAttrs({2})); }, "floating");
  expectError([] { inferOne(OpKind::MaxPool, {{DType::F32, {4, 4}}}, poolAttrs({2})); }, "spatial");
  expectError(
      [&] {
        AttrMap attrs = poolAttrs({int64_t(1) << 62, 2});
        attrs["dilations"] = std::vector<int64_t>{4, 1};
        inferOne(OpKind::MaxPool, {x}, attrs);
      },
      "overflows");
  expectError(
      [&] {
        AttrMap attrs = poolAttrs({2, 2});
        attrs["dilations"] = std::vector<int64_t>{2, 2};
        inferOne(OpKind::AvgPool, {x}, attrs);
      },
      "unknown attribute 'dilations'");
}

} // namespace
