// f16 and bf16 in generated code (stored as 16-bit patterns, computed in float) against the
// reference evaluator, bit for bit: casts over every 16-bit pattern and over f32, f64 and i32
// values at the rounding edges (signed zeros, subnormals, the largest finite values, overflow
// to inf, NaN, ties to even, double rounding through f32), elementwise chains, reductions,
// movement ops, constants, and the error for contractions.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/Error.h"
#include "frontend/Frontend.h"
#include "ir/Evaluator.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

using frontend::GraphBuilder;
using frontend::Var;

// Every 16-bit pattern, as a tensor of `dtype` (f16 or bf16).
Tensor allPatterns(DType dtype) {
  Tensor t(dtype, {65536});
  for (uint32_t i = 0; i < 65536; ++i)
    t.dataAs<uint16_t>()[i] = static_cast<uint16_t>(i);
  return t;
}

float fromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// f32 values at every rounding edge of f16 and bf16, their negations, and random patterns.
Tensor edgeFloats() {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::vector<float> values = {
      0.0f, std::ldexp(1.0f, -24), std::ldexp(1.0f, -25), std::ldexp(3.0f, -26), // f16 subnormals
      std::ldexp(1.0f, -25) + std::ldexp(1.0f, -40), std::ldexp(1023.0f, -24), std::ldexp(2047.0f, -25),
      std::ldexp(1.0f, -14), std::ldexp(1.0f, -14) - std::ldexp(1.0f, -30), std::ldexp(1.0f, -26),
      65504.0f, 65519.0f, 65519.996f, 65520.0f, 65536.0f, 1e10f, kInf, std::numeric_limits<float>::max(),
      1.0f + std::ldexp(1.0f, -11), 1.0f + std::ldexp(3.0f, -11), 1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20),
      1.0f + std::ldexp(1.0f, -8), 1.0f + std::ldexp(3.0f, -8), 1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20),
      fromBits(0x7f7f8000u), fromBits(0x7f7f7fffu), std::ldexp(1.0f, -149), 1e-40f, fromBits(0x007fffffu),
      fromBits(0x00008000u), fromBits(0x00018000u), 0.1f, 1.0f / 3, 2.5f, 1000.5f, 2049.0f,
      std::numeric_limits<float>::quiet_NaN(), fromBits(0x7f800001u), fromBits(0x7fc12345u)};
  size_t count = values.size();
  for (size_t i = 0; i < count; ++i)
    values.push_back(-values[i]);
  std::mt19937 rng(7);
  for (int i = 0; i < 4000; ++i)
    values.push_back(fromBits(static_cast<uint32_t>(rng())));
  Tensor t(DType::F32, {static_cast<int64_t>(values.size())});
  std::memcpy(t.data(), values.data(), values.size() * sizeof(float));
  return t;
}

TEST(CodegenHalf, EveryF16AndBF16PatternWidensAndConverts) {
  GraphBuilder gb("patterns");
  Var h = gb.input("h", DType::F16, {65536});
  Var b = gb.input("b", DType::BF16, {65536});
  auto graph = gb.finish({frontend::cast(h, DType::F32), frontend::cast(h, DType::F64), frontend::cast(h, DType::BF16),
                          frontend::cast(h, DType::I32), frontend::cast(h, DType::Bool), frontend::cast(b, DType::F32),
                          frontend::cast(b, DType::F16), frontend::cast(b, DType::I32), frontend::cast(b, DType::I64)});
  expectBitIdentical(*graph, {allPatterns(DType::F16), allPatterns(DType::BF16)});
}

TEST(CodegenHalf, F32ToF16AndBF16RoundsToNearestEven) {
  GraphBuilder gb("narrow");
  Var x = gb.input("x", DType::F32, {edgeFloats().numElements()});
  Var h = frontend::cast(x, DType::F16), b = frontend::cast(x, DType::BF16);
  auto graph = gb.finish({h, b, frontend::cast(h, DType::F32), frontend::cast(b, DType::F32),
                          frontend::cast(h, DType::BF16), frontend::cast(b, DType::F16)});
  expectBitIdentical(*graph, {edgeFloats()});
}

TEST(CodegenHalf, F64AndIntegersToF16RoundThroughF32) {
  // 1 + 2^-11 + 2^-40 rounds to 1 + 2^-11 in f32, a tie that f16 rounds down to 1: going
  // through f32 as the evaluator does, not straight to the nearest f16 (1 + 2^-10).
  std::vector<double> doubles = {1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40),
                                 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -20),
                                 65519.99999999,
                                 -65520.0,
                                 1e300,
                                 -1e-300,
                                 std::ldexp(1.0, -25),
                                 std::nan(""),
                                 -std::numeric_limits<double>::infinity(),
                                 0.1,
                                 -0.0};
  std::vector<double> ints = {0, 1, -1, 2049, 2051, 65519, 65520, -70000, 16777217, 2147483647, -2147483647 - 1};
  GraphBuilder gb("wide");
  Var d = gb.input("d", DType::F64, {static_cast<int64_t>(doubles.size())});
  Var i = gb.input("i", DType::I32, {static_cast<int64_t>(ints.size())});
  Var l = gb.input("l", DType::I64, {2});
  Var u = gb.input("u", DType::U8, {2});
  auto graph = gb.finish({frontend::cast(d, DType::F16), frontend::cast(d, DType::BF16), frontend::cast(i, DType::F16),
                          frontend::cast(i, DType::BF16), frontend::cast(l, DType::F16), frontend::cast(l, DType::BF16),
                          frontend::cast(u, DType::F16)});
  // 2^60 + 2^36 + 1 is a tie in f32 only when rounded through double first.
  Tensor longs = Tensor::fromDoubles(DType::I64, {2}, {0, 0});
  longs.dataAs<int64_t>()[0] = (int64_t{1} << 60) + (int64_t{1} << 36) + 1;
  longs.dataAs<int64_t>()[1] = -(int64_t{1} << 40) - 1;
  expectBitIdentical(*graph, {Tensor::fromDoubles(DType::F64, {static_cast<int64_t>(doubles.size())}, doubles),
                              Tensor::fromDoubles(DType::I32, {static_cast<int64_t>(ints.size())}, ints), longs,
                              Tensor::fromDoubles(DType::U8, {2}, {0, 255})});
}

TEST(CodegenHalf, UnaryMathOverEveryF16Pattern) {
  GraphBuilder gb("unary");
  Var h = gb.input("h", DType::F16, {65536});
  auto graph = gb.finish({-h, frontend::abs(h), frontend::sqrt(h), frontend::exp(h), frontend::log(h),
                          frontend::tanh(h), frontend::sigmoid(h), frontend::erf(h), frontend::reciprocal(h),
                          frontend::rsqrt(h), frontend::floor(h), frontend::round(h), frontend::sign(h),
                          frontend::relu(h), frontend::sin(h), frontend::isnan(h), frontend::isinf(h),
                          frontend::clamp(h, -0.1, 3.3)});
  expectBitIdentical(*graph, {allPatterns(DType::F16)});
}

TEST(CodegenHalf, BinaryOpsAgainstEveryPattern) {
  // Each pattern against a finite operand (two NaNs would leave the sign of the result to the
  // operand order the compiler picks).
  Tensor other = randomTensor({DType::F16, {65536}}, 3);
  Tensor otherB = randomTensor({DType::BF16, {65536}}, 4);
  for (int64_t i = 0; i < 65536; i += 7)
    other.dataAs<uint16_t>()[i] = static_cast<uint16_t>(i & 0x7bff); // finite patterns, zeros and subnormals
  GraphBuilder gb("binary");
  Var h = gb.input("h", DType::F16, {65536});
  Var y = gb.input("y", DType::F16, {65536});
  Var b = gb.input("b", DType::BF16, {65536});
  Var z = gb.input("z", DType::BF16, {65536});
  auto graph = gb.finish({h + y, h - y, h * y, h / y, y / h, frontend::pow(h, y), frontend::maximum(h, y),
                          frontend::minimum(y, h), frontend::mod(h, y), frontend::mod(y, h), h < y, h == y,
                          b + z, b * z, b / z, frontend::maximum(b, z), frontend::mod(b, z), frontend::exp(b)});
  expectBitIdentical(*graph, {allPatterns(DType::F16), other, allPatterns(DType::BF16), otherB});
}

TEST(CodegenHalf, FusedChainWithBroadcastOnF16) {
  GraphBuilder gb("chain");
  Var x = gb.input("x", DType::F16, {8, 33});
  Var bias = gb.input("bias", DType::F16, {33});
  Var s = gb.input("s", DType::F16, {});
  // Every op rounds to f16 in the reference; the fused kernel must round after each one too
  // (x * 3 + bias would differ if the product stayed in f32).
  Var y = frontend::relu(x * 3.0 + bias) * 2.0 - frontend::exp(x) / (frontend::abs(bias) + s);
  Var w = frontend::where(x > bias, frontend::sqrt(frontend::abs(x)), x * x * x);
  auto graph = gb.finish({y, w, frontend::cast(y * 1000.0, DType::F32)});
  expectBitIdentical(*graph, randomInputs(*graph, 11));
}

TEST(CodegenHalf, ReductionsOnBF16AndF16) {
  GraphBuilder gb("reduce");
  Var x = gb.input("x", DType::BF16, {6, 5, 20});
  Var longRows = gb.input("l", DType::BF16, {3, 100});
  Var h = gb.input("h", DType::F16, {4, 40});
  auto graph = gb.finish({frontend::sum(x, {2}), frontend::mean(x, {0, 2}, true), frontend::max(x, {1}),
                          frontend::min(x, {}), frontend::prod(x * 4.0, {1}), frontend::argmax(x, 2),
                          frontend::sum(longRows, {1}), frontend::max(longRows, {1}), frontend::softmax(h, -1),
                          frontend::sum(h * h, {0})});
  expectBitIdentical(*graph, randomInputs(*graph, 12));
}

TEST(CodegenHalf, MovementOpsOnF16) {
  GraphBuilder gb("movement");
  Var x = gb.input("x", DType::F16, {2, 3, 4});
  Var t = gb.input("t", DType::F16, {64, 70});
  Var idx = gb.input("idx", DType::I64, {5});
  Var column = frontend::reshape(frontend::slice(x, {0}, {1}, {2}), {1, 2, 3});
  Var p = frontend::permute(x, {2, 0, 1}) - frontend::broadcastTo(column, {4, 2, 3});
  auto graph = gb.finish({frontend::permute(x, {2, 0, 1}), frontend::broadcastTo(x, {5, 2, 3, 4}),
                          frontend::transpose(t, 0, 1) * 2.0, frontend::pad(x, {1, 0, 2, 0, 0, 1}, "constant", 0.3),
                          frontend::pad(x, {0, 1, 1, 0, 2, 2}, "reflect"), frontend::concat({x, x * 0.5}, 1),
                          frontend::gather(t, idx, 0), frontend::flatten(x), p});
  std::vector<Tensor> inputs = randomInputs(*graph, 13);
  inputs[2] = Tensor::fromDoubles(DType::I64, {5}, {0, 63, -1, 7, 2});
  expectBitIdentical(*graph, inputs);
}

TEST(CodegenHalf, ConstantsAndWeights) {
  GraphBuilder gb("constants");
  Var x = gb.input("x", DType::F16, {4, 100});
  Var small = gb.constant(Tensor::fromDoubles(DType::F16, {4, 1}, {0.1, -2.5, 65504, 1e-7}));
  Var large = gb.constant(randomTensor({DType::BF16, {100}}, 14));
  Var w = gb.param("w", randomTensor({DType::F16, {100}}, 15));
  auto graph = gb.finish({x * small + w, frontend::cast(x, DType::BF16) - large});
  expectBitIdentical(*graph, randomInputs(*graph, 16));
}

TEST(CodegenHalf, ContractionEpilogueNarrowsToF16) {
  GraphBuilder gb("matmul_cast");
  Var a = gb.input("a", DType::F32, {8, 16});
  Var b = gb.input("b", DType::F32, {16, 12});
  auto graph = gb.finish({frontend::cast(frontend::relu(frontend::matmul(a, b)), DType::F16)});
  std::vector<Tensor> inputs = randomInputs(*graph, 17);
  // f32 sums can differ from the reference's double ones in the last bit, so compare the f16
  // result with a tolerance of one f16 step instead of bit for bit.
  expectMatchesReference(*graph, inputs, testOptions(), 1e-3, 1e-3);
}

TEST(CodegenHalf, ContractionsOnF16AreRejected) {
  GraphBuilder gb("matmul_f16");
  Var a = gb.input("a", DType::F16, {4, 4});
  auto graph = gb.finish({frontend::matmul(a, a)});
  try {
    compile(*graph, testOptions());
    FAIL() << "expected kiln::Error";
  } catch (const kiln::Error &error) {
    std::string message = error.what();
    EXPECT_NE(message.find("matmul"), std::string::npos) << message;
    EXPECT_NE(message.find("f16"), std::string::npos) << message;
  }
}

} // namespace
} // namespace kiln::codegen::test
