// Every row of ir/ElementwiseOps.def compiled against the reference evaluator, in every dtype
// its domain accepts: f16 and bf16 bit for bit over every 16-bit pattern (binary rows: each
// pattern paired with a scattered one), integers and bool bit for bit over their edge values
// (binary rows: every pair), f32 and f64 over a grid with the special values, within the
// deliberate f32-in-float difference. A new row is checked here without a line of its own.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "frontend/Frontend.h"
#include "ir/ElementwiseOps.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

using frontend::GraphBuilder;
using frontend::Var;

bool accepts(ir::UnaryDomain domain, DType dtype) {
  switch (domain) {
  case ir::UnaryDomain::FloatOnly:
  case ir::UnaryDomain::FloatToBool: return isFloat(dtype);
  case ir::UnaryDomain::Numeric: return dtype != DType::Bool;
  case ir::UnaryDomain::BoolOnly: return dtype == DType::Bool;
  }
  return false;
}

bool accepts(ir::BinaryDomain domain, DType dtype) {
  switch (domain) {
  case ir::BinaryDomain::Arithmetic:
  case ir::BinaryDomain::Ordering: return dtype != DType::Bool;
  case ir::BinaryDomain::Equality: return true;
  case ir::BinaryDomain::Logical: return dtype == DType::Bool;
  }
  return false;
}

/// A graph with one input of `type` and one output per row that accepts its dtype; `covered`
/// collects those rows.
std::unique_ptr<ir::Graph> everyRowOn(const TensorType &type, std::set<ir::OpKind> &covered) {
  GraphBuilder gb("table");
  Var x = gb.input("x", type);
  std::vector<Var> outputs;
  for (const ir::UnaryOpRow &row : ir::unaryOpRows())
    if (accepts(row.domain, type.dtype)) {
      outputs.push_back(gb.op(row.op, {x}));
      covered.insert(row.op);
    }
  return gb.finish(outputs);
}

/// A graph with inputs a and b of `type` and one output per binary row that accepts its dtype
/// and `keep` selects; `covered` collects those rows.
template <typename Keep>
std::unique_ptr<ir::Graph> everyBinaryRowOn(const TensorType &type, std::set<ir::OpKind> &covered, Keep keep) {
  GraphBuilder gb("table");
  Var a = gb.input("a", type), b = gb.input("b", type);
  std::vector<Var> outputs;
  for (const ir::BinaryOpRow &row : ir::binaryOpRows())
    if (accepts(row.domain, type.dtype) && keep(row.op)) {
      outputs.push_back(gb.op(row.op, {a, b}));
      covered.insert(row.op);
    }
  return gb.finish(outputs);
}

std::unique_ptr<ir::Graph> everyBinaryRowOn(const TensorType &type, std::set<ir::OpKind> &covered) {
  return everyBinaryRowOn(type, covered, [](ir::OpKind) { return true; });
}

/// Every pair (values[i], values[j]) as the elements of two tensors of `dtype`.
std::pair<Tensor, Tensor> everyPair(DType dtype, const std::vector<double> &values) {
  std::vector<double> a, b;
  for (double x : values)
    for (double y : values)
      a.push_back(x), b.push_back(y);
  Shape shape = {static_cast<int64_t>(a.size())};
  return {Tensor::fromDoubles(dtype, shape, a), Tensor::fromDoubles(dtype, shape, b)};
}

Tensor floatGrid(DType dtype) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> values = {0.0, -0.0, kInf, -kInf, std::numeric_limits<double>::quiet_NaN(), 1e-30, -1e-30,
                                1.0, -1.0, 0.5, -0.5, 100.0, -100.0};
  for (int i = -600; i <= 600; ++i)
    values.push_back(i / 97.0);
  return Tensor::fromDoubles(dtype, {static_cast<int64_t>(values.size())}, values);
}

Tensor allPatterns(DType dtype) {
  Tensor t(dtype, {65536});
  for (uint32_t i = 0; i < 65536; ++i)
    t.dataAs<uint16_t>()[i] = static_cast<uint16_t>(i);
  return t;
}

std::vector<int64_t> integerEdgeValues(DType dtype) {
  std::vector<int64_t> values = {0, 1, -1, 2, -2, 7, -7, 100, -100};
  if (dtype == DType::I64)
    values.insert(values.end(), {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()});
  if (dtype == DType::I32)
    values.insert(values.end(), {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()});
  if (dtype == DType::I8)
    values.insert(values.end(), {-128, 127});
  if (dtype == DType::U8)
    for (int64_t &value : values)
      value &= 0xff;
  return values;
}

Tensor integerEdges(DType dtype) {
  std::vector<int64_t> values = integerEdgeValues(dtype);
  Tensor t(dtype, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i)
    t.setInt(static_cast<int64_t>(i), values[i]);
  return t;
}

/// Every pair of `values` as the elements of two integer tensors of `dtype`, the second
/// filtered by `keepDivisor` (the reference refuses division by zero and negative exponents).
template <typename Keep>
std::pair<Tensor, Tensor> everyIntegerPair(DType dtype, const std::vector<int64_t> &values, Keep keepDivisor) {
  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (int64_t x : values)
    for (int64_t y : values)
      if (keepDivisor(y))
        pairs.emplace_back(x, y);
  Tensor a(dtype, {static_cast<int64_t>(pairs.size())}), b(dtype, {static_cast<int64_t>(pairs.size())});
  for (size_t i = 0; i < pairs.size(); ++i) {
    a.setInt(static_cast<int64_t>(i), pairs[i].first);
    b.setInt(static_cast<int64_t>(i), pairs[i].second);
  }
  return {a, b};
}

TEST(CodegenElementwiseTable, EveryRowMatchesTheReferenceInEveryDtype) {
  std::set<ir::OpKind> covered;
  for (DType dtype : {DType::F32, DType::F64}) {
    SCOPED_TRACE(std::string(dtypeName(dtype)));
    Tensor x = floatGrid(dtype);
    auto graph = everyRowOn(x.type(), covered);
    // f32 is computed in float (ScalarOps.h); f64 calls the evaluator's double functions.
    double tolerance = dtype == DType::F32 ? 2e-6 : 1e-14;
    expectMatchesReference(*graph, {x}, testOptions(), tolerance, tolerance);
  }
  for (DType dtype : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(std::string(dtypeName(dtype)));
    Tensor x = allPatterns(dtype);
    expectBitIdentical(*everyRowOn(x.type(), covered), {x});
  }
  for (DType dtype : {DType::I64, DType::I32, DType::I8, DType::U8}) {
    SCOPED_TRACE(std::string(dtypeName(dtype)));
    Tensor x = integerEdges(dtype);
    expectBitIdentical(*everyRowOn(x.type(), covered), {x});
  }
  Tensor flags = Tensor::fromDoubles(DType::Bool, {2}, {0, 1});
  expectBitIdentical(*everyRowOn(flags.type(), covered), {flags});
  for (const ir::UnaryOpRow &row : ir::unaryOpRows())
    EXPECT_TRUE(covered.count(row.op)) << ir::opName(row.op) << " was compiled in no dtype";
}

TEST(CodegenElementwiseTable, EveryBinaryRowMatchesTheReferenceInEveryDtype) {
  std::set<ir::OpKind> covered;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> floats = {0.0, -0.0, kInf, -kInf, std::numeric_limits<double>::quiet_NaN(), 1e-30, -1e-30,
                                1.0, -1.0, 0.5, -0.5, 2.0, 3.0, -3.0, 100.0, -100.0, 1e30};
  for (int i = -30; i <= 30; ++i)
    floats.push_back(i / 7.0);
  for (DType dtype : {DType::F32, DType::F64}) {
    SCOPED_TRACE(std::string(dtypeName(dtype)));
    auto [a, b] = everyPair(dtype, floats);
    double tolerance = dtype == DType::F32 ? 2e-6 : 1e-14;
    expectMatchesReference(*everyBinaryRowOn(a.type(), covered), {a, b}, testOptions(), tolerance, tolerance);
  }
  for (DType dtype : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(std::string(dtypeName(dtype)));
    Tensor a(dtype, {65536}), b(dtype, {65536});
    for (uint32_t i = 0; i < 65536; ++i) {
      a.dataAs<uint16_t>()[i] = static_cast<uint16_t>(i);
      b.dataAs<uint16_t>()[i] = static_cast<uint16_t>(i * 40503u + 7u); // odd multiplier: every pattern once
    }
    expectBitIdentical(*everyBinaryRowOn(a.type(), covered), {a, b});
  }
  for (DType dtype : {DType::I64, DType::I32, DType::I8, DType::U8}) {
    SCOPED_TRACE(std::string(dtypeName(dtype)));
    std::vector<int64_t> values = integerEdgeValues(dtype);
    auto notPow = [](ir::OpKind op) { return op != ir::OpKind::Pow; };
    auto [a, b] = everyIntegerPair(dtype, values, [](int64_t y) { return y != 0; });
    expectBitIdentical(*everyBinaryRowOn(a.type(), covered, notPow), {a, b});
    auto [base, exponent] = everyIntegerPair(dtype, values, [](int64_t y) { return y >= 0; });
    expectBitIdentical(*everyBinaryRowOn(base.type(), covered, [](ir::OpKind op) { return op == ir::OpKind::Pow; }),
                       {base, exponent});
  }
  auto [p, q] = everyPair(DType::Bool, {0, 1});
  expectBitIdentical(*everyBinaryRowOn(p.type(), covered), {p, q});
  for (const ir::BinaryOpRow &row : ir::binaryOpRows())
    EXPECT_TRUE(covered.count(row.op)) << ir::opName(row.op) << " was compiled in no dtype";
}

} // namespace
} // namespace kiln::codegen::test
