// Every row of ir/ElementwiseOps.def compiled against the reference evaluator, in every dtype
// its domain accepts: f16 and bf16 over every 16-bit pattern and integers and bool bit for bit
// (ScalarOps.h promises both), f32 and f64 over a grid with the special values, within the
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

Tensor integerEdges(DType dtype) {
  std::vector<int64_t> values = {0, 1, -1, 2, -2, 7, -7, 100, -100};
  if (dtype == DType::I64)
    values.insert(values.end(), {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()});
  if (dtype == DType::I32)
    values.insert(values.end(), {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()});
  if (dtype == DType::I8)
    values.insert(values.end(), {-128, 127});
  Tensor t(dtype, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i)
    t.setInt(static_cast<int64_t>(i), dtype == DType::U8 ? (values[i] & 0xff) : values[i]);
  return t;
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

} // namespace
} // namespace kiln::codegen::test
