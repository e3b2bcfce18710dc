// ONNX ops whose results kiln knows at import time: Constant (every value_* form kiln can
// represent), Shape and Size (from the static input type; the input itself is never
// materialised), Range (its operands must be known, since they decide the output shape),
// ConstantOfShape (a broadcast scalar, so a large fill costs nothing until it is used),
// EyeLike (from the input's static shape) and the window functions HannWindow, HammingWindow
// and BlackmanWindow (their size must be known). The importer folds them into constants and
// records the values for static operands.
#include <cmath>

#include "core/SymbolicDim.h"
#include "frontend/onnx/OnnxOpTable.h"
#include "frontend/onnx/OnnxTensor.h"

namespace kiln::frontend {

using ir::OpKind;

namespace {

/// The most elements Range may produce at import time (its result is built as a tensor).
constexpr int64_t kMaxRangeElements = int64_t{1} << 26;
/// The most elements EyeLike may produce: its result is a dense constant built from the input's
/// shape, which may be any static shape without data behind it (a 4096 x 4096 identity fits).
constexpr int64_t kMaxEyeElements = int64_t{1} << 24;

Tensor vectorOf(DType dtype, const std::vector<double> &values) {
  return Tensor::fromDoubles(dtype, {static_cast<int64_t>(values.size())}, values);
}

Tensor int64Vector(const std::vector<int64_t> &values) {
  Tensor t(DType::I64, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i)
    t.setInt(static_cast<int64_t>(i), values[i]);
  return t;
}

} // namespace

void checkConstant(const onnx::NodeProto &node, int64_t, std::vector<std::string> &problems) {
  OnnxAttrs attrs(node);
  for (const char *name : {"sparse_value", "value_string", "value_strings"})
    if (attrs.has(name))
      problems.push_back(fmt::format("a constant given as '{}' is not supported", name));
  if (const onnx::AttributeProto *value = attrs.find("value");
      value && value->type() == onnx::AttributeProto::TENSOR && !dtypeFromOnnx(value->t().data_type()))
    problems.push_back(fmt::format("a constant of type {} is not supported", onnxTypeName(value->t().data_type())));
}

std::vector<ir::Value *> mapConstant(ImportContext &ctx, const onnx::NodeProto &node) {
  OnnxAttrs attrs(node);
  if (const onnx::TensorProto *value = attrs.getTensor("value"))
    return {ctx.constant(decodeTensorProto(*value, ctx.modelDir(), "the constant's value"))};
  if (attrs.has("value_float"))
    return {ctx.constant(Tensor::scalar(DType::F32, attrs.getFloat("value_float", 0)))};
  if (attrs.has("value_floats"))
    return {ctx.constant(vectorOf(DType::F32, attrs.getFloats("value_floats")))};
  if (std::optional<int64_t> value = attrs.optInt("value_int"))
    return {ctx.constant(int64Vector({*value}).reshaped({}))};
  if (std::optional<std::vector<int64_t>> values = attrs.optInts("value_ints"))
    return {ctx.constant(int64Vector(*values))};
  fail("has no value kiln can represent (value, value_float(s) or value_int(s))");
}

void checkConstantOfShape(const onnx::NodeProto &node, int64_t, std::vector<std::string> &problems) {
  if (const onnx::AttributeProto *value = OnnxAttrs(node).find("value");
      value && value->type() == onnx::AttributeProto::TENSOR && !dtypeFromOnnx(value->t().data_type()))
    problems.push_back(fmt::format("a fill value of type {} is not supported", onnxTypeName(value->t().data_type())));
}

std::vector<ir::Value *> mapConstantOfShape(ImportContext &ctx, const onnx::NodeProto &node) {
  std::vector<int64_t> shape = ctx.staticInts(node, 0, "output shape");
  for (int64_t dim : shape)
    if (dim < 0)
      fail("output shape {} has a negative dim", shapeToString(shape));
  numElements(shape);                          // refuses shapes past kiln's limit with a clear message
  Tensor fill = Tensor::scalar(DType::F32, 0); // ONNX's default: a float 0
  if (const onnx::TensorProto *value = OnnxAttrs(node).getTensor("value")) {
    fill = decodeTensorProto(*value, ctx.modelDir(), "the fill value");
    if (fill.numElements() != 1)
      fail("the fill value must hold one element, got {}", fill.type().toString());
    fill = fill.reshaped({});
  }
  return {broadcastTo(ctx, ctx.constant(fill), shape)};
}

std::vector<ir::Value *> mapShape(ImportContext &ctx, const onnx::NodeProto &node) {
  const Shape &shape = ctx.inputType(node, 0).shape;
  auto rank = static_cast<int64_t>(shape.size());
  // Opset 15's start/end select a range of dims, clamped to [0, rank] like a slice.
  OnnxAttrs attrs(node);
  auto clampDim = [rank](int64_t d) { return std::clamp<int64_t>(d < 0 ? d + rank : d, 0, rank); };
  int64_t start = ctx.opset() >= 15 ? clampDim(attrs.getInt("start", 0)) : 0;
  int64_t end = ctx.opset() >= 15 ? clampDim(attrs.getInt("end", rank)) : rank;
  // A symbolic dim becomes its value as a dim (core/SymbolicDim.h): the shape computations
  // that move it (Gather, Concat, Unsqueeze, ...) fold with it exactly, and Reshape and Expand
  // take it back as a dim (frontend/onnx/OnnxSymbolic.h says which ops may see one).
  std::vector<int64_t> dims(shape.begin() + start, shape.begin() + std::max(start, end));
  return {ctx.constant(int64Vector(dims))};
}

std::vector<ir::Value *> mapSize(ImportContext &ctx, const onnx::NodeProto &node) {
  return {ctx.constant(Tensor::scalar(DType::I64, static_cast<double>(ctx.inputType(node, 0).numElements())))};
}

std::vector<ir::Value *> mapRange(ImportContext &ctx, const onnx::NodeProto &node) {
  Tensor start = ctx.staticInput(node, 0, "start");
  Tensor limit = ctx.staticInput(node, 1, "limit");
  Tensor delta = ctx.staticInput(node, 2, "delta");
  for (const Tensor *t : {&start, &limit, &delta})
    if (t->numElements() != 1)
      fail("start, limit and delta must be scalars, got {}", t->type().toString());
  DType dtype = start.dtype();
  if (dtype == DType::Bool)
    fail("cannot make a range of bools");
  Tensor out;
  if (isFloat(dtype)) {
    double first = start.getDouble(0), step = delta.getDouble(0);
    if (step == 0 || !std::isfinite(step) || !std::isfinite(first) || !std::isfinite(limit.getDouble(0)))
      fail("start, limit and delta must be finite and delta non-zero");
    double count = std::max(std::ceil((limit.getDouble(0) - first) / step), 0.0);
    if (count > static_cast<double>(kMaxRangeElements))
      fail("the range would have {} elements", count);
    out = Tensor(dtype, {static_cast<int64_t>(count)});
    for (int64_t i = 0; i < out.numElements(); ++i)
      out.setDouble(i, first + static_cast<double>(i) * step);
  } else {
    // Integers exactly: count = ceil((limit - start) / delta) in 128-bit, so nothing overflows.
    __int128 first = start.getInt(0), step = delta.getInt(0), span = __int128(limit.getInt(0)) - first;
    if (step == 0)
      fail("delta must be non-zero");
    __int128 count = span / step + ((span % step != 0 && (span < 0) == (step < 0)) ? 1 : 0);
    if (count < 0)
      count = 0;
    if (count > kMaxRangeElements)
      fail("the range would have more than {} elements", kMaxRangeElements);
    out = Tensor(dtype, {static_cast<int64_t>(count)});
    for (int64_t i = 0; i < out.numElements(); ++i)
      out.setInt(i, static_cast<int64_t>(first + i * step));
  }
  return {ctx.constant(out)};
}

std::vector<ir::Value *> mapEyeLike(ImportContext &ctx, const onnx::NodeProto &node) {
  const TensorType &like = ctx.inputType(node, 0);
  if (like.rank() != 2)
    fail("input must be 2-D, got {}", like.toString());
  if (like.numElements() > kMaxEyeElements)
    fail("the output {} would have more than {} elements, more than kiln builds at import time",
         shapeToString(like.shape), kMaxEyeElements);
  OnnxAttrs attrs(node);
  std::optional<int64_t> dtype = attrs.optInt("dtype");
  Tensor eye(dtype ? kilnDType(*dtype, "the output dtype") : like.dtype, like.shape);
  int64_t rows = like.shape[0], cols = like.shape[1], k = attrs.getInt("k", 0);
  // Ones where col - row == k.
  for (int64_t r = 0; r < rows; ++r)
    if (k >= -r && k < cols - r)
      eye.setDouble(r * cols + r + k, 1);
  return {ctx.constant(eye)};
}

namespace {

/// The generalised cosine windows: sum over j of (-1)^j a_j cos(2 pi j n / N), with N the size
/// (periodic) or the size - 1 (symmetric), n = 0 .. size - 1.
std::vector<ir::Value *> cosineWindow(ImportContext &ctx, const onnx::NodeProto &node,
                                      const std::vector<double> &coefficients) {
  double size = ctx.staticScalar(node, 0, "window size");
  if (!(size >= 0 && size <= static_cast<double>(kMaxRangeElements)) || size != std::floor(size))
    fail("the window size must be an integer in [0, {}], got {}", kMaxRangeElements, size);
  OnnxAttrs attrs(node);
  DType dtype = kilnDType(attrs.getInt("output_datatype", onnx::TensorProto::FLOAT), "the output dtype");
  auto count = static_cast<int64_t>(size);
  double period = attrs.getInt("periodic", 1) != 0 ? size : size - 1;
  const double kPi = std::acos(-1.0);
  std::vector<double> values;
  for (int64_t n = 0; n < count; ++n) {
    double value = 0, sign = 1;
    for (size_t j = 0; j < coefficients.size(); ++j, sign = -sign)
      value += sign * coefficients[j] * (period == 0 ? 1.0 : std::cos(2 * kPi * double(j) * double(n) / period));
    values.push_back(value);
  }
  return {ctx.constant(vectorOf(dtype, values))};
}

} // namespace

std::vector<ir::Value *> mapHannWindow(ImportContext &ctx, const onnx::NodeProto &node) {
  return cosineWindow(ctx, node, {0.5, 0.5});
}

std::vector<ir::Value *> mapHammingWindow(ImportContext &ctx, const onnx::NodeProto &node) {
  return cosineWindow(ctx, node, {25.0 / 46.0, 21.0 / 46.0});
}

std::vector<ir::Value *> mapBlackmanWindow(ImportContext &ctx, const onnx::NodeProto &node) {
  return cosineWindow(ctx, node, {0.42, 0.5, 0.08});
}

} // namespace kiln::frontend
