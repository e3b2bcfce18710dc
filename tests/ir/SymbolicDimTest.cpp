// Symbolic dims (core/SymbolicDim.h): the encoding keeps static shapes untouched, expressions
// are canonical (equal polynomials are equal int64s), arithmetic is checked, exact division
// recovers the factor a reshape's -1 needs, and evaluation names the symbol it lacks.
#include <gtest/gtest.h>

#include <limits>

#include "core/ShapeMath.h"
#include "core/SymbolicDim.h"
#include "tests/ErrorMatchers.h"

namespace kiln {
namespace {

using test::expectErrorContaining;

TEST(SymbolicDim, StaticShapesStayPlainIntegers) {
  EXPECT_TRUE(isStaticShape({2, 3, 0}));
  EXPECT_TRUE(isStaticShape({}));
  EXPECT_FALSE(isStaticShape({symbolDim("N"), 3}));
  EXPECT_FALSE(isSymbolicDim(-1)); // reshape's -1 is not a symbol
  EXPECT_TRUE(isSymbolicDim(symbolDim("N")));
  EXPECT_EQ(shapeToString({2, 3}), "[2,3]");
  EXPECT_EQ(shapeToString({symbolDim("N"), 3}), "[N,3]");
  EXPECT_TRUE(TensorType({DType::F32, {2}}).isStatic());
}

TEST(SymbolicDim, ExpressionsAreCanonical) {
  int64_t n = symbolDim("N"), s = symbolDim("S");
  EXPECT_EQ(symbolDim("N"), n);
  EXPECT_EQ(dimMul(n, s, "t"), dimMul(s, n, "t"));
  EXPECT_EQ(dimAdd(n, s, "t"), dimAdd(s, n, "t"));
  EXPECT_EQ(dimToString(dimMul(dimMul(s, 3, "t"), n, "t")), "3*N*S");
  EXPECT_EQ(dimToString(dimAdd(dimAdd(n, 1, "t"), s, "t")), "N+S+1");
  EXPECT_EQ(dimToString(dimMul(n, n, "t")), "N*N");
  // (N+1)*2 expands; N*0 and N*1 are the constant 0 and N itself.
  EXPECT_EQ(dimToString(dimMul(dimAdd(n, 1, "t"), 2, "t")), "2*N+2");
  EXPECT_EQ(dimMul(n, 0, "t"), 0);
  EXPECT_EQ(dimMul(n, 1, "t"), n);
  EXPECT_EQ(dimAdd(n, 0, "t"), n);
}

TEST(SymbolicDim, ConstantArithmeticStaysChecked) {
  EXPECT_EQ(dimMul(6, 7, "t"), 42);
  expectErrorContaining([] { dimMul(std::numeric_limits<int64_t>::max(), 2, "what"); }, "what");
  int64_t n = symbolDim("N");
  int64_t big = dimMul(n, int64_t(1) << 40, "t");
  expectErrorContaining([&] { dimMul(big, int64_t(1) << 40, "coef"); }, "coef");
  expectErrorContaining([&] { dimAdd(dimMul(n, std::numeric_limits<int64_t>::max(), "t"), n, "sum"); }, "sum");
}

TEST(SymbolicDim, ExactDivisionRecoversAFactor) {
  int64_t n = symbolDim("N"), s = symbolDim("S");
  int64_t total = dimMul(dimMul(n, s, "t"), 768, "t");
  EXPECT_EQ(dimDivExact(total, 768), dimMul(n, s, "t"));
  EXPECT_EQ(dimDivExact(total, dimMul(n, 12, "t")), dimMul(s, 64, "t"));
  EXPECT_EQ(dimDivExact(dimAdd(dimMul(n, 4, "t"), 8, "t"), 4), dimAdd(n, 2, "t"));
  EXPECT_FALSE(dimDivExact(total, 7));
  EXPECT_FALSE(dimDivExact(n, s));
  EXPECT_FALSE(dimDivExact(12, n));
  EXPECT_FALSE(dimDivExact(n, 0));
  EXPECT_EQ(dimDivExact(12, 4), 3);
}

TEST(SymbolicDim, ProductsOfShapes) {
  int64_t n = symbolDim("N");
  EXPECT_EQ(dimProduct({2, 3, 4}, 0, 3, "t"), 24);
  EXPECT_EQ(dimToString(dimProduct({n, 3, 4}, 0, 3, "t")), "12*N");
  EXPECT_EQ(dimProduct({n, 0}, 0, 2, "t"), 0);
}

TEST(SymbolicDim, EvaluationNamesTheMissingSymbol) {
  int64_t n = symbolDim("N"), s = symbolDim("S");
  int64_t dim = dimAdd(dimMul(n, s, "t"), 1, "t");
  EXPECT_EQ(evaluateDim(dim, {{"N", 3}, {"S", 5}}, "t"), 16);
  EXPECT_EQ(evaluateShape({n, 4}, {{"N", 2}}, "t"), (Shape{2, 4}));
  expectErrorContaining([&] { evaluateDim(dim, {{"N", 3}}, "input 'x'"); }, "input 'x': symbol S");
  expectErrorContaining([&] { evaluateDim(n, {{"N", -1}}, "t"); }, "outside [0, 2^48]");
  expectErrorContaining([&] { evaluateDim(dimMul(n, n, "t"), {{"N", int64_t(1) << 25}}, "t"); }, "outside [0, 2^48]");
}

TEST(SymbolicDim, SymbolNamesAreIdentifiers) {
  EXPECT_TRUE(isValidSymbolName("batch_size"));
  EXPECT_FALSE(isValidSymbolName("f32")); // a dtype would make f32[f32] ambiguous
  EXPECT_FALSE(isValidSymbolName("2N"));
  EXPECT_FALSE(isValidSymbolName("N-1"));
  expectErrorContaining([] { symbolDim("seq len"); }, "'seq len' cannot name a symbolic dim");
  EXPECT_EQ(dimSymbolName(symbolDim("B")), "B");
  EXPECT_FALSE(dimSymbolName(dimMul(symbolDim("B"), 2, "t")));
  EXPECT_EQ(dimSymbols(dimMul(symbolDim("B"), symbolDim("A"), "t")), (std::vector<std::string>{"A", "B"}));
}

TEST(SymbolicDim, ElementCountRefusesSymbolsByName) {
  expectErrorContaining([] { elementCount({symbolDim("N"), 3}, "operand"); },
                        "operand [N,3] has the symbolic dimension N");
  checkShapeWithinLimit({symbolDim("N"), 3}, "ok");
  expectErrorContaining([] { checkShapeWithinLimit({symbolDim("N"), int64_t(1) << 49}, "big"); }, "big [N,");
  expectErrorContaining([] { requireStaticDim({symbolDim("N"), 3}, 0, "conv"); }, "conv needs a static dim 0");
  // A value in the symbolic range that names no expression (a slice bound) prints as a number.
  EXPECT_EQ(dimToString(std::numeric_limits<int64_t>::min()), "-9223372036854775808");
}

} // namespace
} // namespace kiln
