// Generated elementwise kernels against the reference evaluator: chains with broadcasting,
// views folded into indexing (transposes, slices, reshapes), pad, concat, gather, integer and
// bool dtypes, and empty and scalar shapes.
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "frontend/Frontend.h"
#include "ir/Parser.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

using frontend::GraphBuilder;
using frontend::Var;

TEST(CodegenElementwise, ChainWithBroadcast) {
  GraphBuilder gb("chain");
  Var x = gb.input("x", DType::F32, {8, 33});
  Var b = gb.input("b", DType::F32, {33});
  Var y = frontend::relu(x + b) * 2.0 - frontend::exp(x);
  auto graph = gb.finish({y});
  expectMatchesReference(*graph, randomInputs(*graph, 1));
}

// Many stores per element, as a training step's BatchNorm+ReLU has (centred input, output,
// ReLU mask): the inner loops are marked independent for the vectoriser (SourceTest), which
// must not change a value. Widths below, at and above a vector, and with a remainder.
TEST(CodegenElementwise, ManyStoresPerElement) {
  for (int64_t width : {5, 8, 14, 28, 37}) {
    GraphBuilder gb("bn_relu");
    Var x = gb.input("x", DType::F32, {2, 6, 3, width});
    Var r = gb.input("r", DType::F32, {2, 6, 3, width});
    Var mean = gb.input("mean", DType::F32, {6, 1, 1});
    Var scale = gb.input("scale", DType::F32, {6, 1, 1});
    Var centred = x - mean, y = centred * scale + (r - mean) * 0.5;
    auto graph = gb.finish({centred, frontend::relu(y), frontend::cast(frontend::gt(y, 0.0), DType::F32), y * 2.0});
    expectMatchesReference(*graph, randomInputs(*graph, static_cast<uint64_t>(width)));
  }
}

TEST(CodegenElementwise, BroadcastOnBothSidesAndSizeOneDims) {
  GraphBuilder gb("outer");
  Var a = gb.input("a", DType::F32, {5, 1, 7});
  Var b = gb.input("b", DType::F32, {1, 4, 1});
  Var c = gb.input("c", DType::F32, {});
  Var y = frontend::tanh(a * b) + frontend::sigmoid(c) / (frontend::abs(b) + 1.0);
  auto graph = gb.finish({y});
  expectMatchesReference(*graph, randomInputs(*graph, 2));
}

TEST(CodegenElementwise, TransposesAndReshapesBecomeIndexing) {
  GraphBuilder gb("views");
  Var x = gb.input("x", DType::F32, {2, 3, 4, 5});
  Var y = gb.input("y", DType::F32, {5, 4, 3, 2});
  // A transpose of one operand against the other's layout, then a reshape that merges
  // permuted dims (not a free view) and a flatten.
  Var t = frontend::permute(y, {3, 2, 1, 0}) * x;
  Var r = frontend::reshape(frontend::permute(x, {0, 2, 1, 3}), {8, 15}) + 1.0;
  Var f = frontend::flatten(frontend::transpose(t, 1, 3), 1) * 0.5;
  auto graph = gb.finish({t, r, f});
  expectMatchesReference(*graph, randomInputs(*graph, 3));
}

TEST(CodegenElementwise, SlicesWithStepsAndNegativeSteps) {
  GraphBuilder gb("slices");
  Var x = gb.input("x", DType::F32, {6, 10});
  Var a = frontend::slice(x, {1, 2}, {5, 10}, {}, {2, 3});
  Var b = frontend::slice(x, {-1}, {-100}, {1}, {-2});        // reversed columns, every other
  Var c = frontend::slice(x, {4}, {6}, {0}) + frontend::slice(x, {0}, {2}, {0});
  auto graph = gb.finish({frontend::exp(a), b * 3.0, c});
  expectMatchesReference(*graph, randomInputs(*graph, 4));
}

TEST(CodegenElementwise, PadModes) {
  GraphBuilder gb("pads");
  Var x = gb.input("x", DType::F32, {3, 5});
  Var constant = frontend::pad(x + 1.0, {1, 2, 2, 0}, "constant", -7.5);
  Var edge = frontend::pad(x, {2, 1, 0, 3}, "edge");
  Var reflect = frontend::pad(x, {2, 4, 1, 3}, "reflect");
  Var crop = frontend::pad(x, {-1, 1, 0, -2});
  auto graph = gb.finish({constant, edge, reflect, crop});
  expectMatchesReference(*graph, randomInputs(*graph, 5));
}

TEST(CodegenElementwise, ConcatAndSplit) {
  GraphBuilder gb("concat");
  Var a = gb.input("a", DType::F32, {2, 3, 4});
  Var b = gb.input("b", DType::F32, {2, 1, 4});
  Var c = gb.input("c", DType::F32, {2, 5, 4});
  Var joined = frontend::concat({frontend::relu(a), b * 2.0, c}, 1);
  std::vector<Var> parts = frontend::split(joined + 1.0, {4, 5}, 1);
  auto graph = gb.finish({joined, parts[0], parts[1] * 3.0});
  expectMatchesReference(*graph, randomInputs(*graph, 6));
}

TEST(CodegenElementwise, GatherWithNegativeIndices) {
  GraphBuilder gb("gather");
  Var table = gb.input("table", DType::F32, {10, 6});
  Var ids = gb.input("ids", DType::I64, {3, 4});
  Var rows = frontend::gather(table, ids, 0) * 2.0;
  Var cols = frontend::gather(table, ids, 1);
  auto graph = gb.finish({rows, cols});
  Tensor indices = Tensor::fromDoubles(DType::I64, {3, 4}, {0, 1, 5, -1, -6, 2, 3, 4, 5, -2, 0, 1});
  expectMatchesReference(*graph, {randomTensor(table.type(), 7), indices});
}

TEST(CodegenElementwise, IntegerAndBoolOps) {
  GraphBuilder gb("ints");
  Var a = gb.input("a", DType::I64, {4, 6});
  Var b = gb.input("b", DType::I64, {6});
  Var c = gb.input("c", DType::I32, {4, 6});
  Var sum = a * b - a + 3;
  Var quotient = frontend::mod(a + 20, b + 1) + (a + 1) / (b + 1);
  Var mask = frontend::logicalAnd(frontend::gt(a, b), frontend::ne(a, 3));
  Var picked = frontend::where(mask, frontend::cast(c, DType::I64), -frontend::abs(a));
  Var floats = frontend::cast(c, DType::F32) * 0.25 + frontend::cast(mask, DType::F32);
  Var back = frontend::cast(floats * 7.0, DType::I32);
  auto graph = gb.finish({sum, quotient, mask, picked, floats, back});
  expectMatchesReference(*graph, randomInputs(*graph, 8));
}

TEST(CodegenElementwise, NarrowIntegersWrapAndDoublesStayDouble) {
  GraphBuilder gb("narrow");
  Var u = gb.input("u", DType::U8, {3, 7});
  Var i = gb.input("i", DType::I8, {3, 7});
  Var d = gb.input("d", DType::F64, {3, 7});
  Var wrapped = u * gb.constant(Tensor::scalar(DType::U8, 30)) + u;          // past 255
  Var negative = -(i * gb.constant(Tensor::scalar(DType::I8, 20)));          // past -128
  Var precise = frontend::exp(d) * 1e-3 + frontend::tanh(d) + frontend::sum(d, {1}, true);
  auto graph = gb.finish({wrapped, negative, precise, frontend::cast(precise * 100.0, DType::I8)});
  expectMatchesReference(*graph, randomInputs(*graph, 16), testOptions(), 1e-12, 1e-12);
}

TEST(CodegenElementwise, FloatSpecialValuesAndUnaryMath) {
  GraphBuilder gb("math");
  Var x = gb.input("x", DType::F32, {64});
  Var y = frontend::sqrt(frontend::abs(x)) + frontend::log1p(frontend::abs(x)) + frontend::erf(x) +
          frontend::floor(x * 4.0) + frontend::round(x * 3.0) + frontend::sign(x) +
          frontend::clamp(x, -0.5, 0.25) + frontend::maximum(x, 0.1) + frontend::pow(frontend::abs(x), 1.5);
  Var nan = frontend::isnan(frontend::log(x)); // log of a negative number is NaN
  // exp, tanh, sigmoid and erf have f32 versions of kiln's own: check them over a wide range,
  // overflow and underflow included.
  Var wide = x * 120.0;
  Var special = frontend::exp(wide) + frontend::tanh(wide) + frontend::sigmoid(wide) + frontend::erf(x * 4.0) +
                frontend::tanh(x * 0.3) + frontend::erf(x * 0.4) + frontend::gelu(x * 3.0);
  auto graph = gb.finish({y, nan, special, frontend::exp(x * 90.0), frontend::exp(x * 104.0)});
  expectMatchesReference(*graph, randomInputs(*graph, 9));
}

TEST(CodegenElementwise, F32LogAndLog1pAreKilnsOwnAndCorrectlyRounded) {
  // log and log1p of f32 run as kiln_logf and kiln_log1pf (which vectorise) and agree with the
  // evaluator's, computed in double and rounded once, to the bit: over every binade from the
  // smallest subnormal to the largest float, around 1 and around 0 (log1p's series below
  // 2^-12 and its log above), and at 0, -0, -1, negatives, +-inf and NaN.
  std::vector<double> xs = {0.0, -0.0, -1.0, -1.5, -3e38, 1.0, std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity(), std::nan(""), 1.4142135, 0.70710677};
  for (int e = -149; e <= 127; ++e)
    for (double m : {1.0, 1.1, 1.3333, 1.5, 1.75, 1.999})
      xs.push_back(std::ldexp(m, e));
  for (int k = 1; k <= 40; ++k) {
    const double d = std::ldexp(1.0, -k);
    for (double v : {1.0 + d, 1.0 - d, d, -d, 0.9 * d, -0.9 * d})
      xs.push_back(v);
  }
  std::vector<double> finite;
  for (double v : xs)
    if (std::isfinite(v) && std::abs(v) < 3.4e38)
      finite.push_back(v);
  const int64_t n = static_cast<int64_t>(xs.size());
  GraphBuilder gb("logs");
  Var x = gb.input("x", DType::F32, {n});
  auto graph = gb.finish({frontend::log(x), frontend::log1p(x)});
  EXPECT_EQ(countInSource(*graph, "kiln_logf("), 2); // the helper's definition and the call
  EXPECT_EQ(countInSource(*graph, "std::log"), 0);
  expectBitIdentical(*graph, {Tensor::fromDoubles(DType::F32, {n}, xs)});
}

TEST(CodegenElementwise, FloorAndCeilThroughNearbyintAreExact) {
  // floor and ceil run as kiln_floor and kiln_ceil (nearbyint moved by one, which vectorises
  // where std::floor does not) and agree with the evaluator's std::floor and std::ceil to the
  // bit, the sign of zero included: halves and near-halves of both signs (nearbyint takes
  // halves to even), integers, values at and above 2^23 where every float is whole, the
  // smallest subnormals, the infinities and NaN; in f32 and f64.
  std::vector<double> xs = {0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, -0.49999997, 0.50000006,
                            -0.50000006, 0.99999994, -0.99999994, 1.0, -1.0, 3.0, -7.0, 8388607.5, -8388607.5,
                            8388608.0, 16777217.0, -3e38, 3e38, 1e-45, -1e-45, std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity(), std::nan("")};
  for (int k = 0; k < 64; ++k)
    xs.push_back(std::ldexp(static_cast<double>(k % 2 ? -(k + 3) : (k + 1)), -(k % 7)) + 0.25 * (k % 4));
  const int64_t n = static_cast<int64_t>(xs.size());
  for (DType dtype : {DType::F32, DType::F64}) {
    const std::string type = std::string(dtypeName(dtype)) + "[" + std::to_string(n) + "]";
    auto graph = ir::parseGraph("graph @rounding(%x: " + type + ") -> (" + type + ", " + type + ") {\n" +
                                "  %f = floor(%x) : " + type + "\n  %c = ceil(%x) : " + type +
                                "\n  return %f, %c\n}\n");
    EXPECT_EQ(countInSource(*graph, "std::floor("), 0);
    EXPECT_EQ(countInSource(*graph, "std::ceil("), 0);
    expectBitIdentical(*graph, {Tensor::fromDoubles(dtype, {n}, xs)});
  }
}

TEST(CodegenElementwise, SmallIntegerPowersAreProductsInDouble) {
  // pow(x, 3) (GELU's tanh form) and pow(x, 4) of f32 x are products in double, with no libm
  // call per element, and agree with the evaluator's std::pow to the bit, over magnitudes from
  // tiny to overflowing and for negative bases; pow(x, 2.5) keeps std::pow.
  GraphBuilder gb("powers");
  Var x = gb.input("x", DType::F32, {4, 100});
  auto graph = gb.finish({frontend::pow(x * 8.0, 3.0), frontend::pow(x * 3e9, 4.0), frontend::pow(x * 1e-12, 3.0)});
  EXPECT_EQ(countInSource(*graph, "std::pow("), 0);
  expectBitIdentical(*graph, randomInputs(*graph, 17));
  GraphBuilder other("fractional_power");
  Var y = other.input("y", DType::F32, {4, 100});
  EXPECT_EQ(countInSource(*other.finish({frontend::pow(frontend::abs(y), 2.5)}), "std::pow("), 1);
}

TEST(CodegenElementwise, ScalarsEmptyTensorsAndIota) {
  GraphBuilder gb("edges");
  Var s = gb.input("s", DType::F32, {});
  Var e = gb.input("e", DType::F32, {3, 0});
  Var iota = gb.iota({2, 5}, 1, DType::I64);
  auto graph = gb.finish({s * 2.0 + 1.0, frontend::exp(e), iota * 3, frontend::cast(iota, DType::F32) + s});
  expectMatchesReference(*graph, randomInputs(*graph, 10));
}

TEST(CodegenElementwise, LongVectorIsSplitIntoBlocks) {
  GraphBuilder gb("long");
  Var x = gb.input("x", DType::F32, {100003});
  Var y = gb.input("y", DType::F32, {100003});
  auto graph = gb.finish({x * y + 1.0});
  expectMatchesReference(*graph, randomInputs(*graph, 11));
}

TEST(CodegenElementwise, OutputsThatAreInputsParamsConstantsOrRepeated) {
  GraphBuilder gb("passthrough");
  Var x = gb.input("x", DType::F32, {2, 3});
  Var w = gb.param("w", randomTensor({DType::F32, {2, 3}}, 12));
  Var small = gb.constant(Tensor::fromDoubles(DType::F32, {3}, {1, 2, 3}));
  Var big = gb.constant(randomTensor({DType::F32, {100}}, 13));
  Var y = x + w;
  auto graph = gb.finish({x, w, small, big, y, y});
  expectMatchesReference(*graph, randomInputs(*graph, 14));
}

TEST(CodegenElementwise, ANamedValueReturnedTwiceGetsTwoOutputNames) {
  // The runtime finds outputs by name; a named value returned twice once made two outputs "x"
  // and a model that compiled but would not load (found by kiln-fuzz-compile, seed 102031).
  GraphBuilder gb("repeated_names");
  Var x = gb.input("x", DType::F32, {2, 3});
  Var y = frontend::exp(x);
  y.setName("y");
  auto graph = gb.finish({x, y, x, y});
  expectMatchesReference(*graph, randomInputs(*graph, 15));
  runtime::Executable executable = compile(*graph, testOptions());
  std::vector<std::string> names;
  for (const runtime::TensorSpec &output : executable.outputs())
    names.push_back(output.name);
  EXPECT_EQ(names, (std::vector<std::string>{"x", "y", "x_1", "y_1"}));
}

TEST(CodegenElementwise, UnfusedGraphMatchesToo) {
  GraphBuilder gb("unfused");
  Var x = gb.input("x", DType::F32, {4, 6});
  Var b = gb.input("b", DType::F32, {6, 1});
  Var y = frontend::reshape(frontend::permute(x, {1, 0}) + b, {3, 8});
  auto graph = gb.finish({frontend::relu(y) * 2.0});
  CompileOptions options = testOptions();
  options.fuse = false;
  expectMatchesReference(*graph, randomInputs(*graph, 15), options);
}

} // namespace
} // namespace kiln::codegen::test
