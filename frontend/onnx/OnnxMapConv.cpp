// Convolution ONNX ops: Conv and ConvTranspose. kiln's conv and conv_transpose take explicit
// pads and no bias, so the mappings resolve auto_pad (and ConvTranspose's output_shape) into
// pads here and add the bias per channel.
#include <algorithm>

#include "core/ShapeMath.h"
#include "frontend/onnx/OnnxWindow.h"

namespace kiln::frontend {

using ir::OpKind;

namespace {

/// The weight's kernel dims, checked against the kernel_shape attribute when there is one.
std::vector<int64_t> kernelOf(const onnx::NodeProto &node, const ir::Value *x, const ir::Value *w) {
  if (w->rank() != x->rank())
    fail("weight {} must have the input's rank (input {})", shapeToString(w->shape()), shapeToString(x->shape()));
  std::vector<int64_t> kernel(w->shape().begin() + std::min<int64_t>(2, w->rank()), w->shape().end());
  if (auto declared = OnnxAttrs(node).optInts("kernel_shape"); declared && *declared != kernel)
    fail("kernel_shape {} differs from the weight's spatial dims {}", shapeToString(*declared), shapeToString(kernel));
  return kernel;
}

ir::Value *addBias(ImportContext &ctx, const onnx::NodeProto &node, ir::Value *y) {
  if (!ctx.hasInput(node, 2))
    return y;
  return ctx.op(OpKind::Add, {y, perChannel(ctx, ctx.input(node, 2), y->rank())});
}

int64_t floorDiv2(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

} // namespace

void checkConv(const onnx::NodeProto &node, int64_t, std::vector<std::string> &problems) {
  checkAutoPad(node, problems);
}

std::vector<ir::Value *> mapConv(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0), *w = ctx.input(node, 1);
  OnnxWindow window = readWindow(node, x, kernelOf(node, x, w), true);
  ir::Value *y = ctx.op(OpKind::Conv, {x, w},
                        {{"strides", window.strides},
                         {"pads", window.pads},
                         {"dilations", window.dilations},
                         {"groups", OnnxAttrs(node).getInt("group", 1)}});
  return {addBias(ctx, node, y)};
}

// ConvTranspose's output size per spatial dim, before padding, is
//   natural = stride * (in - 1) + output_padding + (kernel - 1) * dilation + 1.
// Pads come from the attribute, or (output_shape given, or auto_pad SAME_*, whose target is
// in * stride) from total = natural - target split as the ONNX specification states: SAME_UPPER
// puts floor(total / 2) at the start, everything else puts it at the end. A negative total
// (a target past the natural size) extends the output: at the end through output_padding, at
// the start by padding the result with zeros.
std::vector<ir::Value *> mapConvTranspose(ImportContext &ctx, const onnx::NodeProto &node) {
  ir::Value *x = ctx.input(node, 0), *w = ctx.input(node, 1);
  std::vector<int64_t> kernel = kernelOf(node, x, w);
  if (x->rank() < 3)
    fail("input must be [N, C, spatial...], got {}", shapeToString(x->shape()));
  size_t rank = static_cast<size_t>(x->rank() - 2);
  OnnxAttrs attrs(node);
  std::vector<int64_t> strides = perSpatialDim(attrs, "strides", rank);
  std::vector<int64_t> dilations = perSpatialDim(attrs, "dilations", rank);
  std::vector<int64_t> outputPadding = attrs.getInts("output_padding", std::vector<int64_t>(rank, 0));
  if (outputPadding.size() != rank)
    fail("'output_padding' {} needs {} entries", shapeToString(outputPadding), rank);
  std::string mode = attrs.getString("auto_pad", "NOTSET");
  if (!isKnownAutoPad(mode))
    fail("auto_pad '{}' is not supported", mode);
  std::optional<std::vector<int64_t>> outputShape = attrs.optInts("output_shape");
  if (outputShape && outputShape->size() == rank + 2) // [N, C, spatial...] is accepted too
    outputShape->erase(outputShape->begin(), outputShape->begin() + 2);
  if (outputShape && outputShape->size() != rank)
    fail("'output_shape' {} needs {} entries (one per spatial dim)", shapeToString(*outputShape), rank);

  std::vector<int64_t> pads(2 * rank, 0), leading(rank, 0);
  if (outputShape || mode == "SAME_UPPER" || mode == "SAME_LOWER") {
    // The sizes come from the file (output_padding and output_shape are any int64), so the
    // arithmetic is checked, and the size asked for must be a dim within kiln's limit.
    for (size_t d = 0; d < rank; ++d) {
      int64_t in = x->shape()[2 + d];
      std::string what = fmt::format("spatial dim {}: the output size asked for (output_shape {}, auto_pad {})", d,
                                     outputShape ? shapeToString(*outputShape) : std::string("none"), mode);
      int64_t span = checkedAdd(checkedMul(kernel[d] - 1, dilations[d], what), 1, what);
      int64_t natural = checkedMul(strides[d], in - 1, what);
      natural = checkedAdd(checkedAdd(natural, outputPadding[d], what), span, what);
      int64_t target = checkedDim(outputShape ? (*outputShape)[d] : checkedMul(in, strides[d], what), what);
      int64_t total = checkedSub(natural, target, what);
      int64_t begin = mode == "SAME_UPPER" ? floorDiv2(total) : total - floorDiv2(total);
      int64_t end = total - begin;
      if (end < 0) {
        outputPadding[d] = checkedSub(outputPadding[d], end, "output_padding");
        end = 0;
      }
      if (begin < 0) {
        leading[d] = -begin;
        begin = 0;
      }
      pads[d] = begin;
      pads[rank + d] = end;
    }
  } else if (mode == "NOTSET") {
    pads = attrs.getInts("pads", pads);
    if (pads.size() != 2 * rank)
      fail("'pads' {} needs {} entries ([begins..., ends...])", shapeToString(pads), 2 * rank);
  }
  ir::Value *y = ctx.op(OpKind::ConvTranspose, {x, w},
                        {{"strides", strides},
                         {"pads", pads},
                         {"dilations", dilations},
                         {"output_padding", outputPadding},
                         {"groups", attrs.getInt("group", 1)}});
  if (std::any_of(leading.begin(), leading.end(), [](int64_t v) { return v > 0; })) {
    std::vector<int64_t> padAll(2 * (rank + 2), 0);
    for (size_t d = 0; d < rank; ++d)
      padAll[2 + d] = leading[d];
    y = ctx.op(OpKind::Pad, {y}, {{"pads", padAll}, {"mode", std::string("constant")}, {"value", 0.0}});
  }
  return {addBias(ctx, node, y)};
}

} // namespace kiln::frontend
