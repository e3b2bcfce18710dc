// Elementwise ONNX ops that are more than one kiln op or read attributes (those that are exactly
// one op are mapped from ir/ElementwiseOps.def's OnnxName column, the binary ones through
// mapBinaryOp here): IsInf, Pow, BitShift, Mod, the variadic Sum/Mean/Max/Min, Where, Cast,
// CastLike and Clip. ONNX requires both operands of a binary op to have one type, as kiln does,
// so a mismatch is reported by kiln's builder; only Pow (opset 12+) lets the exponent differ,
// and it is cast to the base's type. Before opset 7 binary ops broadcast only on request
// (broadcast=1, axis), which is resolved into numpy broadcasting here.
#include <algorithm>
#include <cmath>
#include <limits>

#include "frontend/onnx/OnnxOpTable.h"
#include "frontend/onnx/OnnxTensor.h"

namespace kiln::frontend {

using ir::OpKind;

namespace {

/// Before opset 7 a binary op broadcast only with broadcast=1, and then B's dims lined up with
/// A's starting at `axis` (default: B's dims are A's trailing ones); without it the shapes had
/// to be equal. B is reshaped so that numpy broadcasting lines its dims up the same way.
ir::Value *legacyBroadcastOperand(const onnx::NodeProto &node, ImportContext &ctx, ir::Value *a, ir::Value *b) {
  OnnxAttrs attrs(node);
  if (attrs.getInt("broadcast", 0) == 0) {
    if (a->shape() != b->shape())
      fail("operands {} and {} differ in shape; before opset 7 that needs broadcast=1", shapeToString(a->shape()),
           shapeToString(b->shape()));
    return b;
  }
  int64_t rankA = a->rank(), rankB = b->rank();
  int64_t axis = attrs.getInt("axis", rankA - rankB);
  if (axis < 0)
    axis += rankA;
  if (rankB > rankA || axis < 0 || axis + rankB > rankA)
    fail("legacy broadcast of {} into {} at axis {} does not fit", shapeToString(b->shape()), shapeToString(a->shape()),
         attrs.getInt("axis", rankA - rankB));
  Shape aligned(static_cast<size_t>(rankA - axis), 1);
  std::copy(b->shape().begin(), b->shape().end(), aligned.begin());
  return reshapeTo(ctx, b, aligned);
}

/// Sum, Max, Min: a left-to-right chain over every operand (one operand is a copy of it).
ir::Value *chain(ImportContext &ctx, const onnx::NodeProto &node, OpKind op) {
  int n = ctx.numInputs(node);
  if (n < 1)
    fail("needs at least one input");
  ir::Value *acc = ctx.input(node, 0);
  for (int i = 1; i < n; ++i)
    acc = ctx.op(op, {acc, ctx.input(node, i)});
  return acc;
}

} // namespace

ir::Value *mapBinaryOp(ImportContext &ctx, const onnx::NodeProto &node, OpKind op) {
  ir::Value *a = ctx.input(node, 0), *b = ctx.input(node, 1);
  if (ctx.opset() < 7)
    b = legacyBroadcastOperand(node, ctx, a, b);
  return ctx.op(op, {a, b});
}

std::vector<ir::Value *> mapIsInf(ImportContext &ctx, const onnx::NodeProto &node) {
  OnnxAttrs attrs(node);
  bool positive = attrs.getInt("detect_positive", 1) != 0, negative = attrs.getInt("detect_negative", 1) != 0;
  ir::Value *x = ctx.input(node, 0);
  ir::Value *isInf = ctx.op(OpKind::IsInf, {x});
  if (positive && negative)
    return {isInf};
  // One sign only: an infinity of the other sign must not count. Neither: nothing counts
  // (x != x is true only for NaN, which is never infinite).
  ir::Value *wanted = !positive && !negative ? ctx.op(OpKind::Ne, {x, x})
                                             : ctx.op(positive ? OpKind::Gt : OpKind::Lt, {x, ctx.scalarLike(x, 0)});
  return {ctx.op(OpKind::And, {isInf, wanted})};
}

std::vector<ir::Value *> mapPow(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *base = ctx.input(node, 0), *exponent = ctx.input(node, 1);
  if (ctx.opset() < 7)
    exponent = legacyBroadcastOperand(node, ctx, base, exponent);
  if (exponent->dtype() != base->dtype())
    exponent = ctx.op(OpKind::Cast, {exponent}, {{"to", base->dtype()}});
  return {ctx.op(OpKind::Pow, {base, exponent})};
}

// BitShift is defined on the unsigned integers: uint8 is a kiln dtype, uint16 is held in i32
// and uint32/uint64 in i64 (ONNX allows no signed operands, so i32 is uint16 and i64 is
// uint32 or uint64). A right shift is a division by 2^y, 0 once y reaches the width; for the
// held types the cut-off is where 2^y stops fitting the held type (31 or 63), which gives the
// same results, as a held value is below 2^16 or 2^63. A left shift is a multiply by 2^y
// reduced modulo 2^width: uint8 wraps in u8 itself (2^8 wraps to 0, shifting everything out);
// uint16 and uint32 shift within the held type, which has the room (x < 2^16 times 2^15, or
// x < 2^32 times 2^31), and are reduced with Mod. The scan refuses left shifts of uint64, whose
// result need not fit i64, so an i64 left shift here is one of uint32.
std::vector<ir::Value *> mapBitShift(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0), *y = ctx.input(node, 1);
  DType dtype = x->dtype();
  if (y->dtype() != dtype || (dtype != DType::U8 && dtype != DType::I32 && dtype != DType::I64))
    fail("needs two operands of one unsigned type (uint8, or uint16/uint32/uint64, which kiln holds as i32/i64), "
         "got {} and {}",
         dtypeName(x->dtype()), dtypeName(y->dtype()));
  std::string direction = OnnxAttrs(node).getString("direction", "");
  bool left = direction == "LEFT";
  if (!left && direction != "RIGHT")
    fail("direction must be \"LEFT\" or \"RIGHT\", got \"{}\"", direction);
  ir::Value *two = ctx.scalarLike(x, 2);
  if (left && dtype == DType::U8)
    return {ctx.op(OpKind::Mul, {x, ctx.op(OpKind::Pow, {two, y})})};
  int64_t width = dtype == DType::U8 ? 8 : dtype == DType::I32 ? 16 : 32; // of uint8, uint16, uint32
  int64_t limit = left || dtype == DType::U8 ? width : dtype == DType::I32 ? 31 : 63;
  ir::Value *inRange = ctx.op(OpKind::Lt, {y, ctx.scalarLike(y, static_cast<double>(limit))});
  ir::Value *safeShift = ctx.op(OpKind::Where, {inRange, y, ctx.scalarLike(y, 0)});
  ir::Value *scale = ctx.op(OpKind::Pow, {two, safeShift});
  ir::Value *shifted =
      left ? ctx.op(OpKind::Mod, {ctx.op(OpKind::Mul, {x, scale}), ctx.scalarLike(x, std::ldexp(1.0, width))},
                    {{"fmod", int64_t{0}}})
           : ctx.op(OpKind::Div, {x, scale});
  return {ctx.op(OpKind::Where, {inRange, shifted, ctx.scalarLike(x, 0)})};
}

std::vector<ir::Value *> mapMod(ImportContext &ctx, const onnx::NodeProto &node) {
  int64_t fmod = OnnxAttrs(node).getInt("fmod", 0);
  return {ctx.op(OpKind::Mod, {ctx.input(node, 0), ctx.input(node, 1)}, {{"fmod", fmod}})};
}

std::vector<ir::Value *> mapSum(ImportContext &ctx, const onnx::NodeProto &node) {
  return {chain(ctx, node, OpKind::Add)};
}
std::vector<ir::Value *> mapMax(ImportContext &ctx, const onnx::NodeProto &node) {
  return {chain(ctx, node, OpKind::Max)};
}
std::vector<ir::Value *> mapMin(ImportContext &ctx, const onnx::NodeProto &node) {
  return {chain(ctx, node, OpKind::Min)};
}

std::vector<ir::Value *> mapMean(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *sum = chain(ctx, node, OpKind::Add);
  if (ctx.numInputs(node) == 1)
    return {sum};
  return {ctx.op(OpKind::Div, {sum, ctx.scalarLike(sum, ctx.numInputs(node))})};
}

std::vector<ir::Value *> mapWhere(ImportContext &ctx, const onnx::NodeProto &node) {
  return {ctx.op(OpKind::Where, {ctx.input(node, 0), ctx.input(node, 1), ctx.input(node, 2)})};
}

namespace {

/// Cast's target: an element type number, or before opset 6 its name ("FLOAT").
std::optional<int64_t> castTarget(const onnx::NodeProto &node, int64_t opset) {
  OnnxAttrs attrs(node);
  if (opset >= 6 || !attrs.has("to"))
    return attrs.optInt("to");
  std::string name = attrs.getString("to", "");
  onnx::TensorProto::DataType type;
  if (!onnx::TensorProto::DataType_Parse(name, &type))
    fail("attribute 'to' names no ONNX element type: '{}'", name);
  return static_cast<int64_t>(type);
}

} // namespace

void checkCast(const onnx::NodeProto &node, int64_t opset, std::vector<std::string> &problems) {
  std::optional<int64_t> to = castTarget(node, opset);
  // A cast into a type kiln holds widened is refused by the scan, which says why.
  if (to && !heldDTypeFromOnnx(static_cast<int32_t>(*to)))
    problems.push_back(
        fmt::format("cast to {} is not supported (kiln has no such dtype)", onnxTypeName(static_cast<int32_t>(*to))));
}

std::vector<ir::Value *> mapCast(ImportContext &ctx, const onnx::NodeProto &node) {
  std::optional<int64_t> to = castTarget(node, ctx.opset());
  if (!to)
    fail("attribute 'to' is required");
  DType dtype = kilnDType(*to, "the target type 'to'");
  ir::Value *x = ctx.input(node, 0);
  if (x->dtype() == dtype)
    return {x};
  return {ctx.op(OpKind::Cast, {x}, {{"to", dtype}})};
}

std::vector<ir::Value *> mapCastLike(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0);
  DType dtype = ctx.inputType(node, 1).dtype;
  if (x->dtype() == dtype)
    return {x};
  return {ctx.op(OpKind::Cast, {x}, {{"to", dtype}})};
}

// Clip's bounds are attributes before opset 11 and optional scalar inputs from 11 on; kiln
// needs them at import time either way.
std::vector<ir::Value *> mapClip(ImportContext &ctx, const onnx::NodeProto &node) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double lo = -kInf, hi = kInf;
  if (ctx.opset() < 11) {
    OnnxAttrs attrs(node);
    lo = attrs.getFloat("min", -kInf);
    hi = attrs.getFloat("max", kInf);
  } else {
    if (ctx.hasInput(node, 1))
      lo = ctx.staticScalar(node, 1, "lower bound 'min'");
    if (ctx.hasInput(node, 2))
      hi = ctx.staticScalar(node, 2, "upper bound 'max'");
  }
  if (std::isnan(lo) || std::isnan(hi))
    fail("the bounds must not be NaN (min {}, max {})", lo, hi);
  // ONNX: when min exceeds max every element becomes max.
  if (lo > hi)
    lo = hi;
  ir::Value *x = ctx.input(node, 0);
  if (lo == -kInf && hi == kInf)
    return {x};
  return {ctx.op(OpKind::Clip, {x}, {{"min", lo}, {"max", hi}})};
}

} // namespace kiln::frontend
