#pragma once
// Helpers shared by the IR tests (tests/ir/Ops*Test.cpp, GraphTest.cpp): building tensors and
// attributes, running one op the way a frontend would (builder, verifier, reference evaluator),
// comparing results, and expecting a kiln::Error. Expectations stay in the tests; these helpers
// only run and compare.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/Verifier.h"

namespace kiln::test {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
inline constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
inline constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
inline constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();

// ---- row-major indices ------------------------------------------------------------------------

/// The multi-index of flat position `flat` in `shape`, and back.
inline Shape unflatten(int64_t flat, const Shape &shape) {
  Shape index(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

inline int64_t flatten(const Shape &index, const Shape &shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    flat = flat * shape[d] + index[d];
  return flat;
}

// ---- tensors and attributes -----------------------------------------------------------------

/// A tensor of `dtype` holding `values` in row-major order (converted as Tensor::setDouble does).
Tensor tensorOf(DType dtype, Shape shape, const std::vector<double> &values);
Tensor i64s(Shape shape, const std::vector<double> &values);
Tensor f32s(Shape shape, const std::vector<double> &values);

/// An integer tensor set with setInt, so values past 2^53 stay exact.
Tensor intTensor(DType dtype, Shape shape, const std::vector<int64_t> &values);

/// 0, 1, 2, ... in row-major order.
Tensor seq(DType dtype, Shape shape);

/// fn applied to every element (read as double, so f32 inputs are the rounded ones): the
/// closed form of an elementwise op.
Tensor mapped(const Tensor &x, const std::function<double(double)> &fn);

/// The elements in row-major order, as doubles and as exact integers.
std::vector<double> values(const Tensor &t);
std::vector<int64_t> intsOf(const Tensor &t);

/// The type f32[shape].
TensorType f32(Shape shape);

/// Attribute shorthands: an int, an ints list and a string.
ir::Attribute int1(int64_t value);
ir::Attribute ints(std::vector<int64_t> values);
ir::Attribute str(const char *value);

// ---- running one op -------------------------------------------------------------------------

/// Builds a one-node graph over `inputs` with the Builder (attribute completion and inference),
/// verifies it, checks the expansion of a composite (expectExpandsToPrimitives) and evaluates
/// it with the reference evaluator. Returns every output.
std::vector<Tensor> runOps(ir::OpKind op, const std::vector<Tensor> &inputs, ir::AttrMap attrs = {});

/// runOps for an op with exactly one output.
Tensor runOp(ir::OpKind op, const std::vector<Tensor> &inputs, ir::AttrMap attrs = {});

/// The first output type `op` infers for `types`, after attribute completion.
TensorType inferOne(ir::OpKind op, const std::vector<TensorType> &types, ir::AttrMap attrs = {});

/// Expands `op` and, recursively, every composite in its decomposition: only primitives and
/// sources may remain, and each decomposition must verify and produce the types that inference
/// promises.
void expectExpandsToPrimitives(ir::OpKind op, const std::vector<TensorType> &types, const ir::AttrMap &attrs,
                               int depth = 0);

/// Prints a one-op graph and parses it back: the op's attributes must survive the text form.
void expectRoundTrip(ir::OpKind op, const std::vector<TensorType> &types, ir::AttrMap attrs);

// ---- comparing ------------------------------------------------------------------------------

/// Element-by-element check in which NaN matches NaN; exact when tolerance is 0 (so infinities
/// and signed values compare as values), else within the absolute tolerance.
void expectValues(const Tensor &got, const std::vector<double> &want, double tolerance = 0);

/// compareTensors as a gtest assertion (use in EXPECT_TRUE); a failure shows what was got.
::testing::AssertionResult near(const Tensor &got, const Tensor &want, double rtol, double atol);
::testing::AssertionResult near(const Tensor &got, const Tensor &want, double tolerance);

// ---- errors ---------------------------------------------------------------------------------

/// The message of the kiln::Error that `fn` throws. Throwing nothing, or anything other than a
/// kiln::Error, is a test failure (the returned text then says so).
std::string errorFrom(const std::function<void()> &fn);

/// Expects `fn` to throw a kiln::Error whose message contains `fragment`.
void expectError(const std::function<void()> &fn, const std::string &fragment);

} // namespace kiln::test

/// Expects `statement` to throw a kiln::Error whose message contains `fragment`; a failure is
/// reported at the caller's line.
#define EXPECT_ERROR(statement, fragment)                                                                    \
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, fragment, ::kiln::test::errorFrom([&] { statement; }))
