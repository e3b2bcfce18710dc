#include "frontend/Functional.h"

#include "core/Error.h"
#include "frontend/Math.h"
#include "frontend/Movement.h"

namespace kiln::frontend {

using ir::OpKind;

namespace {

/// The defined operands converted to their common promoted dtype (undefined ones stay so).
std::vector<Var> promoteAll(std::vector<Var> operands) {
  const Var *first = nullptr;
  for (const Var &v : operands)
    if (v.defined() && !first)
      first = &v;
  if (!first)
    return operands;
  DType common = first->dtype();
  for (const Var &v : operands)
    if (v.defined())
      common = promoteTypes(common, v.dtype());
  for (Var &v : operands)
    if (v.defined() && &v.builder() == &first->builder()) // a foreign Var is reported by op()
      v = cast(v, common);
  return operands;
}

Var floatOperand(const Var &x) { return isFloat(x.dtype()) ? x : cast(x, DType::F32); }

/// Expands a torch-style spatial argument (one entry, or one per spatial dim) to `count`.
Ints spatial(const Ints &values, size_t count, std::string_view what, std::string_view name) {
  if (values.size() == count)
    return values;
  if (values.size() == 1)
    return Ints(count, values[0]);
  fail("{}: {} needs 1 or {} entries, got {}", what, name, count, values.size());
}

void requireRank(const Var &x, int64_t rank, std::string_view what, std::string_view layout) {
  if (x.rank() != rank)
    fail("{}: expects a {}-d input {}, got {}", what, rank, layout, x.type().toString());
}

/// Adds a per-channel bias [C] to y [N, C, spatial...].
Var addChannelBias(const Var &y, const Var &bias, std::string_view what) {
  if (!bias.defined())
    return y;
  if (bias.rank() != 1 || bias.dim(0) != y.dim(1))
    fail("{}: bias has type {}, expected [{}] for {} output channels", what, bias.type().toString(), y.dim(1),
         y.dim(1));
  Shape shape(static_cast<size_t>(y.rank()), 1);
  shape[1] = y.dim(1);
  return y + reshape(bias, shape);
}

} // namespace

Var matmul(const Var &a, const Var &b) {
  auto ops = promoteAll({a, b});
  return ops[0].builder().op(OpKind::MatMul, {ops[0], ops[1]});
}

Var linear(const Var &x, const Var &weight, const Var &bias) {
  auto ops = promoteAll({x, weight, bias});
  if (!bias.defined())
    ops.pop_back();
  return ops[0].builder().op(OpKind::Linear, ops);
}

Var conv(const Var &x, const Var &weight, const Var &bias, Ints strides, Ints pads, Ints dilations,
         int64_t groups) {
  auto ops = promoteAll({x, weight, bias});
  Var y = ops[0].builder().op(OpKind::Conv, {ops[0], ops[1]},
                              {{"strides", std::move(strides)},
                               {"pads", std::move(pads)},
                               {"dilations", std::move(dilations)},
                               {"groups", groups}});
  return addChannelBias(y, ops[2], "conv");
}

Var conv1d(const Var &x, const Var &weight, const Var &bias, int64_t stride, int64_t padding, int64_t dilation,
           int64_t groups) {
  requireRank(x, 3, "conv1d", "[N,C,L]");
  return conv(x, weight, bias, {stride}, {padding, padding}, {dilation}, groups);
}

Var conv2d(const Var &x, const Var &weight, const Var &bias, Ints stride, Ints padding, Ints dilation,
           int64_t groups) {
  requireRank(x, 4, "conv2d", "[N,C,H,W]");
  Ints pad = spatial(padding, 2, "conv2d", "padding");
  return conv(x, weight, bias, spatial(stride, 2, "conv2d", "stride"), {pad[0], pad[1], pad[0], pad[1]},
              spatial(dilation, 2, "conv2d", "dilation"), groups);
}

Var maxPool2d(const Var &x, Ints kernel, Ints stride, Ints padding, Ints dilation, bool ceilMode) {
  requireRank(x, 4, "max_pool2d", "[N,C,H,W]");
  Ints k = spatial(kernel, 2, "max_pool2d", "kernel");
  Ints pad = spatial(padding, 2, "max_pool2d", "padding");
  // The IR's default stride is 1; torch's is the kernel size.
  Ints s = stride.empty() ? k : spatial(stride, 2, "max_pool2d", "stride");
  return x.builder().op(OpKind::MaxPool, {x},
                        {{"kernel", k},
                         {"strides", s},
                         {"pads", Ints{pad[0], pad[1], pad[0], pad[1]}},
                         {"dilations", spatial(dilation, 2, "max_pool2d", "dilation")},
                         {"ceil_mode", int64_t{ceilMode}}});
}

Var avgPool2d(const Var &x, Ints kernel, Ints stride, Ints padding, bool ceilMode, bool countIncludePad) {
  requireRank(x, 4, "avg_pool2d", "[N,C,H,W]");
  Ints k = spatial(kernel, 2, "avg_pool2d", "kernel");
  Ints pad = spatial(padding, 2, "avg_pool2d", "padding");
  Ints s = stride.empty() ? k : spatial(stride, 2, "avg_pool2d", "stride");
  return x.builder().op(OpKind::AvgPool, {x},
                        {{"kernel", k},
                         {"strides", s},
                         {"pads", Ints{pad[0], pad[1], pad[0], pad[1]}},
                         {"ceil_mode", int64_t{ceilMode}},
                         {"count_include_pad", int64_t{countIncludePad}}});
}

Var batchNorm(const Var &x, const Var &scale, const Var &bias, const Var &mean, const Var &var, double epsilon) {
  auto ops = promoteAll({x, scale, bias, mean, var});
  return ops[0].builder().op(OpKind::BatchNorm, ops, {{"epsilon", epsilon}});
}

Var layerNorm(const Var &x, int64_t axis, const Var &weight, const Var &bias, double epsilon) {
  if (!x.defined())
    fail("layer_norm: operand 0 is undefined");
  auto ops = promoteAll({x, weight, bias});
  if (!weight.defined() && bias.defined()) {
    // The IR's operands are positional (x, weight?, bias?): a bias alone needs a unit weight.
    Tensor ones(ops[2].dtype(), ops[2].shape());
    for (int64_t i = 0; i < ones.numElements(); ++i)
      ones.setDouble(i, 1.0);
    ops[1] = ops[0].builder().constant(ones);
  }
  while (!ops.back().defined())
    ops.pop_back();
  return ops[0].builder().op(OpKind::LayerNorm, ops, {{"axis", axis}, {"epsilon", epsilon}});
}

Var softmax(const Var &x, int64_t axis) {
  Var operand = floatOperand(x);
  return operand.builder().op(OpKind::Softmax, {operand}, {{"axis", axis}});
}

Var logSoftmax(const Var &x, int64_t axis) {
  Var operand = floatOperand(x);
  return operand.builder().op(OpKind::LogSoftmax, {operand}, {{"axis", axis}});
}

Var gelu(const Var &x, const std::string &approximate) {
  Var operand = floatOperand(x);
  return operand.builder().op(OpKind::Gelu, {operand}, {{"approximate", approximate}});
}

Var silu(const Var &x) {
  Var operand = floatOperand(x);
  return operand.builder().op(OpKind::Silu, {operand});
}

Var mseLoss(const Var &prediction, const Var &target, const std::string &reduction) {
  auto ops = promoteAll({prediction, target});
  return ops[0].builder().op(OpKind::MseLoss, ops, {{"reduction", reduction}});
}

Var crossEntropy(const Var &logits, const Var &labels, const std::string &reduction) {
  Var operand = floatOperand(logits);
  return operand.builder().op(OpKind::CrossEntropy, {operand, labels}, {{"reduction", reduction}});
}

} // namespace kiln::frontend
