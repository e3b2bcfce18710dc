// Window attribute reading for the convolution and pooling mappings.
#include "frontend/onnx/OnnxWindow.h"

#include <algorithm>

#include "core/ShapeMath.h"

namespace kiln::frontend {

namespace {

/// ONNX 1.12's shape inference for Conv and the pools (which the importer runs on every model
/// it maps) finds SAME padding by subtracting the stride from the input size one step at a
/// time, whenever auto_pad is given (other than VALID), pads is not and the stride is above 1:
/// a dim of 2^40 with stride 2 keeps it busy for hours. Dims needing more steps than this are
/// refused up front.
constexpr int64_t kMaxAutoPadStrideSteps = int64_t{1} << 26;

} // namespace

bool isKnownAutoPad(const std::string &mode) {
  return mode == "NOTSET" || mode == "VALID" || mode == "SAME_UPPER" || mode == "SAME_LOWER";
}

void checkAutoPad(const onnx::NodeProto &node, std::vector<std::string> &problems) {
  std::string mode = OnnxAttrs(node).getString("auto_pad", "NOTSET");
  if (!isKnownAutoPad(mode))
    problems.push_back(fmt::format("auto_pad '{}' is not supported (NOTSET, VALID, SAME_UPPER or SAME_LOWER)", mode));
}

std::vector<int64_t> perSpatialDim(const OnnxAttrs &attrs, const std::string &name, size_t rank) {
  std::vector<int64_t> values = attrs.getInts(name, std::vector<int64_t>(rank, 1));
  if (values.size() != rank)
    fail("'{}' {} needs {} entries (one per spatial dim)", name, shapeToString(values), rank);
  for (int64_t v : values)
    if (v < 1)
      fail("'{}' {} must be >= 1", name, shapeToString(values));
  return values;
}

OnnxWindow readWindow(const onnx::NodeProto &node, const ir::Value *x, std::vector<int64_t> kernel, bool hasDilations) {
  if (x->rank() < 3)
    fail("input must be [N, C, spatial...], got {}", shapeToString(x->shape()));
  size_t rank = static_cast<size_t>(x->rank() - 2);
  if (kernel.size() != rank)
    fail("kernel {} needs one entry per spatial dim of input {}", shapeToString(kernel), shapeToString(x->shape()));
  for (int64_t k : kernel)
    if (k < 1)
      fail("kernel {} must have sizes >= 1", shapeToString(kernel));
  OnnxAttrs attrs(node);
  OnnxWindow w;
  w.kernel = std::move(kernel);
  w.strides = perSpatialDim(attrs, "strides", rank);
  w.dilations = hasDilations ? perSpatialDim(attrs, "dilations", rank) : std::vector<int64_t>(rank, 1);
  std::string mode = attrs.getString("auto_pad", "NOTSET");
  if (attrs.has("auto_pad") && mode != "VALID" && !attrs.has("pads"))
    for (size_t d = 0; d < rank; ++d)
      if (w.strides[d] > 1 && x->shape()[2 + d] / w.strides[d] > kMaxAutoPadStrideSteps)
        fail("spatial dim {} of size {} needs more than {} strides of {}; ONNX's shape inference for auto_pad {} "
             "would take too long",
             d, x->shape()[2 + d], kMaxAutoPadStrideSteps, w.strides[d], mode);
  if (mode == "NOTSET") {
    w.pads = attrs.getInts("pads", std::vector<int64_t>(2 * rank, 0));
    if (w.pads.size() != 2 * rank)
      fail("'pads' {} needs {} entries ([begins..., ends...])", shapeToString(w.pads), 2 * rank);
    return w;
  }
  if (!isKnownAutoPad(mode))
    fail("auto_pad '{}' is not supported", mode);
  w.pads.assign(2 * rank, 0);
  if (mode == "VALID")
    return w;
  for (size_t d = 0; d < rank; ++d) {
    int64_t in = x->shape()[2 + d], stride = w.strides[d];
    int64_t out = in / stride + (in % stride != 0 ? 1 : 0);
    // Attributes come from the file: overflow is an error, not undefined behaviour.
    std::string what = fmt::format("window arithmetic (kernel {}, strides {}, dilations {})", shapeToString(w.kernel),
                                   shapeToString(w.strides), shapeToString(w.dilations));
    int64_t span = checkedAdd(checkedMul(w.kernel[d] - 1, w.dilations[d], what), 1, what);
    int64_t reach = checkedAdd(checkedMul(std::max<int64_t>(out - 1, 0), stride, what), span, what);
    int64_t total = std::max<int64_t>(0, reach - in);
    int64_t begin = mode == "SAME_UPPER" ? total / 2 : total - total / 2;
    w.pads[d] = begin;
    w.pads[rank + d] = total - begin;
  }
  return w;
}

ir::Value *perChannel(ImportContext &ctx, ir::Value *v, int64_t rank) {
  Shape shape(static_cast<size_t>(rank - 1), 1);
  shape[0] = v->shape().empty() ? 1 : v->shape()[0];
  return reshapeTo(ctx, v, shape);
}

} // namespace kiln::frontend
