// einsum: each classic use (matmul, batch matmul, transpose, trace, diagonal, outer product,
// sums, ellipsis broadcasting) against a loop written here for that use, the implicit output
// rule, integer exactness, edge cases and malformed equations.
#include <gtest/gtest.h>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/Verifier.h"
#include "tests/ir/OpTestUtil.h"

using namespace kiln;
using namespace kiln::ir;
using namespace kiln::test;

namespace {

Tensor einsum(const std::string &equation, const std::vector<Tensor> &inputs) {
  return runOp(OpKind::Einsum, inputs, {{"equation", equation}});
}

Shape inferShape(const std::string &equation, const std::vector<TensorType> &types) {
  return inferOne(OpKind::Einsum, types, {{"equation", equation}}).shape;
}

Tensor random(Shape shape, uint64_t seed) { return randomTensor({DType::F64, std::move(shape)}, seed); }

TEST(OpsEinsum, MatMulAndBatchMatMul) {
  Tensor a = random({3, 4}, 1), b = random({4, 5}, 2);
  Tensor want(DType::F64, {3, 5});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t k = 0; k < 5; ++k) {
      double sum = 0;
      for (int64_t j = 0; j < 4; ++j)
        sum += a.getDouble(i * 4 + j) * b.getDouble(j * 5 + k);
      want.setDouble(i * 5 + k, sum);
    }
  EXPECT_TRUE(near(einsum("ij,jk->ik", {a, b}), want, 1e-12));
  EXPECT_TRUE(near(einsum("ij,jk", {a, b}), want, 1e-12));              // implicit: i and k, sorted
  EXPECT_TRUE(near(einsum(" i j , j k -> i k ", {a, b}), want, 1e-12)); // spaces are ignored

  Tensor x = random({2, 3, 4}, 3), y = random({2, 4, 2}, 4);
  Tensor batched(DType::F64, {2, 3, 2});
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t k = 0; k < 2; ++k) {
        double sum = 0;
        for (int64_t j = 0; j < 4; ++j)
          sum += x.getDouble((n * 3 + i) * 4 + j) * y.getDouble((n * 4 + j) * 2 + k);
        batched.setDouble((n * 3 + i) * 2 + k, sum);
      }
  EXPECT_TRUE(near(einsum("bij,bjk->bik", {x, y}), batched, 1e-12));
  EXPECT_TRUE(near(einsum("...ij,...jk->...ik", {x, y}), batched, 1e-12));
  // Implicit output of "bij,bjk" is "ik": b and j occur twice, so both are summed.
  EXPECT_EQ(inferShape("bij,bjk", {{DType::F32, {2, 3, 4}}, {DType::F32, {2, 4, 5}}}), (Shape{3, 5}));
}

TEST(OpsEinsum, TransposeTraceDiagonalAndSums) {
  Tensor m = random({3, 4}, 5);
  Tensor transposed(DType::F64, {4, 3});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j)
      transposed.setDouble(j * 3 + i, m.getDouble(i * 4 + j));
  EXPECT_TRUE(einsum("ij->ji", {m}).identical(transposed));
  EXPECT_TRUE(einsum("ji", {m}).identical(transposed)); // implicit output "ij" of term "ji"

  Tensor square = random({4, 4}, 6);
  double trace = 0;
  Tensor diagonal(DType::F64, {4});
  for (int64_t i = 0; i < 4; ++i) {
    trace += square.getDouble(i * 5);
    diagonal.setDouble(i, square.getDouble(i * 5));
  }
  Tensor t = einsum("ii", {square});
  EXPECT_EQ(t.shape(), Shape{});
  EXPECT_NEAR(t.getDouble(0), trace, 1e-12);
  EXPECT_NEAR(einsum("ii->", {square}).getDouble(0), trace, 1e-12);
  EXPECT_TRUE(einsum("ii->i", {square}).identical(diagonal));

  // Batched diagonal through an ellipsis, and a diagonal across three dims.
  Tensor stack = random({2, 3, 3}, 7);
  Tensor diagonals(DType::F64, {2, 3});
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t i = 0; i < 3; ++i)
      diagonals.setDouble(n * 3 + i, stack.getDouble(n * 9 + i * 4));
  EXPECT_TRUE(einsum("...ii->...i", {stack}).identical(diagonals));
  Tensor cube = random({3, 3, 3}, 8);
  Tensor cubeDiagonal(DType::F64, {3});
  for (int64_t i = 0; i < 3; ++i)
    cubeDiagonal.setDouble(i, cube.getDouble(i * 13));
  EXPECT_TRUE(einsum("iii->i", {cube}).identical(cubeDiagonal));

  // Row sums and the total.
  Tensor rows(DType::F64, {3});
  double total = 0;
  for (int64_t i = 0; i < 3; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < 4; ++j)
      sum += m.getDouble(i * 4 + j);
    rows.setDouble(i, sum);
    total += sum;
  }
  EXPECT_TRUE(near(einsum("ij->i", {m}), rows, 1e-12));
  EXPECT_NEAR(einsum("ij->", {m}).getDouble(0), total, 1e-12);
}

TEST(OpsEinsum, OuterProductsAndThreeOperands) {
  Tensor u = random({3}, 9), v = random({4}, 10), w = random({2}, 11);
  Tensor outer(DType::F64, {3, 4});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j)
      outer.setDouble(i * 4 + j, u.getDouble(i) * v.getDouble(j));
  EXPECT_TRUE(near(einsum("i,j->ij", {u, v}), outer, 0));
  EXPECT_TRUE(near(einsum("i,j", {u, v}), outer, 0));
  // The implicit output is alphabetical: "j,i" on (v, u) gives [i, j] as well.
  EXPECT_TRUE(near(einsum("j,i", {v, u}), outer, 0));

  Tensor triple(DType::F64, {3, 4, 2});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t k = 0; k < 2; ++k)
        triple.setDouble((i * 4 + j) * 2 + k, u.getDouble(i) * v.getDouble(j) * w.getDouble(k));
  EXPECT_TRUE(near(einsum("i,j,k->ijk", {u, v, w}), triple, 1e-15));

  // A chain of three matrices: sum over j and k.
  Tensor a = random({2, 3}, 12), b = random({3, 4}, 13), c = random({4, 2}, 14);
  Tensor chain(DType::F64, {2, 2});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t l = 0; l < 2; ++l) {
      double sum = 0;
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t k = 0; k < 4; ++k)
          sum += a.getDouble(i * 3 + j) * b.getDouble(j * 4 + k) * c.getDouble(k * 2 + l);
      chain.setDouble(i * 2 + l, sum);
    }
  EXPECT_TRUE(near(einsum("ij,jk,kl->il", {a, b, c}), chain, 1e-12));
  // A scalar operand scales.
  Tensor two = Tensor::scalar(DType::F64, 2);
  Tensor doubled(DType::F64, {3});
  for (int64_t i = 0; i < 3; ++i)
    doubled.setDouble(i, 2 * u.getDouble(i));
  EXPECT_TRUE(near(einsum(",i->i", {two, u}), doubled, 0));
}

TEST(OpsEinsum, EllipsisBroadcasts) {
  // [2, 1, 3, 4] x [5, 4, 2] -> [2, 5, 3, 2]: the "..." dims [2, 1] and [5] broadcast to [2, 5].
  Tensor a = random({2, 1, 3, 4}, 15), b = random({5, 4, 2}, 16);
  Tensor want(DType::F64, {2, 5, 3, 2});
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t q = 0; q < 5; ++q)
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t k = 0; k < 2; ++k) {
          double sum = 0;
          for (int64_t j = 0; j < 4; ++j)
            sum += a.getDouble((p * 3 + i) * 4 + j) * b.getDouble((q * 4 + j) * 2 + k);
          want.setDouble(((p * 5 + q) * 3 + i) * 2 + k, sum);
        }
  EXPECT_TRUE(near(einsum("...ij,...jk->...ik", {a, b}), want, 1e-12));
  EXPECT_TRUE(near(einsum("...ij,...jk", {a, b}), want, 1e-12)); // implicit: "..." then i, k
  // "..." in the middle, and an explicit output without "..." sums over those dims.
  Tensor x = random({2, 3, 4}, 17);
  Tensor lastFirst(DType::F64, {4, 2});
  double sumAll = 0;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 4; ++j) {
      double sum = 0;
      for (int64_t m = 0; m < 3; ++m)
        sum += x.getDouble((i * 3 + m) * 4 + j);
      lastFirst.setDouble(j * 2 + i, sum);
      sumAll += sum;
    }
  EXPECT_TRUE(near(einsum("i...j->ji", {x}), lastFirst, 1e-12));
  EXPECT_NEAR(einsum("...->", {x}).getDouble(0), sumAll, 1e-12);
  // "..." may cover no dims at all.
  EXPECT_TRUE(einsum("...ij->...ji", {random({3, 4}, 18)}).identical(einsum("ij->ji", {random({3, 4}, 18)})));
  EXPECT_EQ(inferShape("ij->...ij", {{DType::F32, {2, 3}}}), (Shape{2, 3}));
}

TEST(OpsEinsum, IntegersEdgeCasesAndDTypes) {
  // Integers are exact past 2^53 and wrap like int64.
  int64_t big = (int64_t(1) << 53) + 1;
  Tensor a(DType::I64, {2}), b = Tensor::fromDoubles(DType::I64, {2}, {3, 1});
  a.setInt(0, big);
  a.setInt(1, 1);
  EXPECT_EQ(einsum("i,i->", {a, b}).getInt(0), big * 3 + 1);
  Tensor m = Tensor::fromDoubles(DType::I32, {2, 2}, {1, 2, 3, 4});
  Tensor mm = einsum("ij,jk->ik", {m, m});
  EXPECT_EQ(mm.dtype(), DType::I32);
  EXPECT_TRUE(mm.identical(Tensor::fromDoubles(DType::I32, {2, 2}, {7, 10, 15, 22})));
  // f32 and f16 round once at the end.
  Tensor f = Tensor::fromDoubles(DType::F16, {3}, {1, 2, 3});
  EXPECT_EQ(einsum("i,i", {f, f}).getDouble(0), 14);

  // Empty dims: a summed empty dim gives zeros, a kept one an empty result.
  Tensor zeros = einsum("ij,jk->ik", {Tensor(DType::F32, {2, 0}), Tensor(DType::F32, {0, 3})});
  EXPECT_TRUE(zeros.identical(Tensor(DType::F32, {2, 3})));
  EXPECT_EQ(einsum("ij->ji", {Tensor(DType::F32, {0, 3})}).shape(), (Shape{3, 0}));
  // Scalars: the empty equation and "->" keep a scalar.
  Tensor s = Tensor::scalar(DType::F32, 4);
  EXPECT_EQ(einsum("", {s}).getDouble(0), 4);
  EXPECT_EQ(einsum("->", {s}).getDouble(0), 4);
  // Size-1 dims are ordinary labels.
  EXPECT_EQ(inferShape("ij,jk->ik", {{DType::F32, {1, 1}}, {DType::F32, {1, 5}}}), (Shape{1, 5}));
}

TEST(OpsEinsum, Errors) {
  TensorType m{DType::F32, {2, 3}}, n{DType::F32, {3, 4}};
  auto infer = [](std::string equation, std::vector<TensorType> types) {
    return [=] { inferShape(equation, types); };
  };
  expectError(infer("ij,jk->ik", {m}), "has 2 operand terms but einsum got 1 inputs");
  expectError(infer("ij->ik", {m}), "output label 'k' does not appear");
  expectError(infer("ij->ii", {m}), "names 'i' twice");
  expectError(infer("...ij->......ij", {m}), "more than one '...'");
  expectError(infer("ij->i->j", {m}), "more than one '->'");
  expectError(infer("ij-ji", {m}), "character '-'");
  expectError(infer("ij>ji", {m}), "character '>'");
  expectError(infer("i1,jk", {m, n}), "character '1'");
  expectError(infer("i.j", {m}), "'.' that is not part of '...'");
  expectError(infer("i..j", {m}), "'.' that is not part of '...'");
  expectError(infer("......", {m}), "more than one '...'");
  expectError(infer("ijk", {m}), "has rank 2 but its term 'ijk' names 3 dims");
  expectError(infer("i", {m}), "has rank 2 but its term 'i' names 1 dims");
  expectError(infer("ijk...", {m}), "fewer than the 3 letters");
  expectError(infer("ij,jk->ik", {m, {DType::F32, {4, 4}}}),
              "label 'j' has size 3 in operand 0 (dim 1) but size 4 in operand 1 (dim 0)");
  expectError(infer("ii", {m}), "label 'i' has size 2 in operand 0 (dim 0) but size 3 in operand 0 (dim 1)");
  expectError(infer("...i,...i", {{DType::F32, {2, 3}}, {DType::F32, {4, 3}}}), "do not broadcast");
  expectError(infer("ij,jk", {m, {DType::F64, {3, 4}}}), "dtype");
  expectError(infer("ij", {{DType::Bool, {2, 3}}}), "bool");
  expectError(
      [] {
        inferTypes(OpKind::Einsum, {}, completeAttrs(OpKind::Einsum, {{"equation", std::string("")}}));
      },
      "expects at least 1 inputs");
  expectError([&] { inferTypes(OpKind::Einsum, {m}, completeAttrs(OpKind::Einsum, {})); },
              "missing required attribute 'equation'");
}

TEST(OpsEinsum, PrintsAndParsesBack) {
  expectRoundTrip(OpKind::Einsum, {{DType::F32, {2, 3, 4}}, {DType::F32, {4, 5}}},
                  {{"equation", std::string("...ij, jk -> ...ik")}});
  expectRoundTrip(OpKind::Einsum, {{DType::I64, {3, 3}}}, {{"equation", std::string("ii")}});
}

} // namespace
