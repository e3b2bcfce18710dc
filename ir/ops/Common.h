#pragma once
// Helpers shared by the op family files: shape rules (broadcasting, axes) and the index
// arithmetic of the reference evaluator. Written for clarity: the evaluator is the oracle.
// Shape arithmetic in inference (sums and products of dims and attributes) goes through
// core/ShapeMath.h, included here for every family; the evaluator's flat indices stay below
// the element count of a valid type (at most 2^48), so they need no checks.
#include <functional>

#include "core/Error.h"
#include "core/ShapeMath.h"
#include "core/SymbolicDim.h"
#include "ir/Attribute.h"
#include "ir/Op.h"

namespace kiln::ir::ops {

/// numpy broadcasting of two shapes; throws kiln::Error naming both shapes if incompatible.
Shape broadcastShapes(const Shape &a, const Shape &b);

/// Requires every input to have the same dtype; returns it.
DType commonDType(const std::vector<TensorType> &inputs);

/// Normalises reduction/permutation axes for `rank`: negatives mapped, duplicates rejected.
std::vector<int64_t> normalizeAxes(const std::vector<int64_t> &axes, int64_t rank, std::string_view what);

/// Multi-index <-> flat index for row-major shapes.
std::vector<int64_t> unflattenIndex(int64_t flat, const Shape &shape);
int64_t flattenIndex(const std::vector<int64_t> &index, const Shape &shape);

/// Flat index into a tensor of shape `inShape` that is broadcast to `outShape`, for the
/// element at multi-index `outIndex` of the output (inShape right-aligned against outShape).
int64_t broadcastSourceIndex(const std::vector<int64_t> &outIndex, const Shape &inShape);

/// Calls fn(index, flat) for every element of `shape` in row-major order.
void forEachIndex(const Shape &shape, const std::function<void(const std::vector<int64_t> &, int64_t)> &fn);

/// The product of shape[from, to): the element count of a block of dims, checked like
/// kiln::elementCount (core/ShapeMath.h); a block of a valid shape always passes.
int64_t productOf(const Shape &shape, size_t from, size_t to);

/// Copies `count` elements between tensors of one dtype, by flat index. Bytes move as they are,
/// so every dtype (an i64 above 2^53, a NaN payload) survives exactly.
void copyElements(const Tensor &from, int64_t fromFlat, Tensor &to, int64_t toFlat, int64_t count);

/// Index operands (gather, scatter, ...): i64, or also i32 where `allowI32`.
void requireIndexDType(const TensorType &indices, bool allowI32 = true);

/// The element `flat` of `indices` as a position in [0, dim) along data axis `axis`: negatives
/// wrap once, anything else out of range is an error naming the op, the index and where it sits.
int64_t resolveIndex(std::string_view op, const Tensor &indices, int64_t flat, int64_t axis, int64_t dim);

/// Elementwise evaluation with broadcasting: out[i] = fn(inputs at the broadcast position).
/// Values are read as double for float inputs and as exact int64 for integer and bool inputs.
using ScalarFn = std::function<double(const std::vector<double> &)>;
using IntFn = std::function<int64_t(const std::vector<int64_t> &)>;
Tensor mapElements(const std::vector<Tensor> &inputs, const TensorType &outType, const ScalarFn &floatFn,
                   const IntFn &intFn);

/// An int attribute that ONNX uses as a boolean: 0 or 1, anything else an error naming it.
bool attrFlag(const AttrMap &attrs, const std::string &name);

/// Attribute spec shorthands for family files.
AttrSpec intAttr(std::string name, std::optional<int64_t> defaultValue = std::nullopt);
AttrSpec floatAttr(std::string name, std::optional<double> defaultValue = std::nullopt);
AttrSpec intsAttr(std::string name, std::optional<std::vector<int64_t>> defaultValue = std::nullopt);
AttrSpec floatsAttr(std::string name, std::optional<std::vector<double>> defaultValue = std::nullopt);
AttrSpec stringAttr(std::string name, std::optional<std::string> defaultValue = std::nullopt);
AttrSpec dtypeAttr(std::string name, std::optional<DType> defaultValue = std::nullopt);
/// A tensor attribute whose default is the undefined tensor (absent).
AttrSpec optionalTensorAttr(std::string name);

} // namespace kiln::ir::ops
