// Contraction epilogues as post ops (ContractionPostOps.h).
#include "codegen/ContractionPostOps.h"

#include <fmt/format.h>

#include "codegen/ScalarOps.h"
#include "runtime/KernelAbi.h"

namespace kiln::codegen {

using ir::OpKind;

namespace {

/// Whether `bias` (f32) broadcast to `out` varies along dim `channelDim` only, read as one
/// contiguous run of out[channelDim] floats.
std::optional<StridedAccess> channelBias(const KernelPlan &plan, int stageIndex, const ir::Value &bias,
                                         const Shape &out, size_t channelDim) {
  const Shape &shape = bias.shape();
  if (bias.dtype() != DType::F32 || shape.size() > out.size() || out.size() - shape.size() > channelDim)
    return std::nullopt;
  std::optional<StridedAccess> access = stridedAccess(plan, stageIndex, bias);
  if (!access)
    return std::nullopt;
  const size_t lead = out.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    const bool channel = d + lead == channelDim;
    if (channel ? shape[d] != out[channelDim] || (shape[d] > 1 && access->strides[d] != 1) : shape[d] != 1)
      return std::nullopt;
  }
  return access;
}

} // namespace

std::optional<ContractionPostOps> matchPostOps(const KernelEmitter &e, int stageIndex, size_t channelDim) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const ir::Value *anchor = stage.anchor->output();
  if (stage.stores.size() != 1 || stage.stores[0].buffer != stage.tileBuffer || stage.stores[0].value == anchor)
    return std::nullopt;
  ContractionPostOps post;
  const ir::Value *value = stage.stores[0].value;
  if (value->dtype() != DType::F32 || !value->producer())
    return std::nullopt;
  const ir::Node *node = value->producer();
  if (node->op() == OpKind::Relu || node->op() == OpKind::Clip) {
    post.activation = node->op() == OpKind::Relu ? KILN_ACTIVATION_RELU : KILN_ACTIVATION_CLIP;
    if (node->op() == OpKind::Clip)
      post.lo = node->attrFloat("min"), post.hi = node->attrFloat("max");
    value = node->input(0);
  } else if (node->op() == OpKind::Mul) { // SiLU: x * sigmoid(x), either way round
    for (int i = 0; i < 2 && post.activation == KILN_ACTIVATION_NONE; ++i) {
      const ir::Node *gate = node->input(1 - i)->producer();
      if (gate && gate->op() == OpKind::Sigmoid && gate->input(0) == node->input(i)) {
        post.activation = KILN_ACTIVATION_SILU;
        value = node->input(i);
      }
    }
    if (post.activation == KILN_ACTIVATION_NONE)
      return std::nullopt;
  }
  // A convolution that accumulated into its residual r computes the body's `X + r` node as X
  // with the tile (conv + r) for the convolution's value (passes/fusion/AccumulatedOperand.h).
  if (const passes::AccumulatedAdd &sum = e.accumulatedAdd(); sum.add && stage.anchor->op() == OpKind::Conv) {
    if (value != sum.add->output())
      return std::nullopt;
    value = sum.rest;
  }
  const ir::Value *tile = anchor;
  if (value == tile)
    return post;
  node = value->producer();
  if (!node || node->op() != OpKind::Add || value->shape() != anchor->shape())
    return std::nullopt;
  const ir::Value *bias = node->input(0) == tile ? node->input(1) : node->input(1) == tile ? node->input(0) : nullptr;
  if (!bias || bias == tile)
    return std::nullopt;
  post.bias = channelBias(e.plan(), stageIndex, *bias, anchor->shape(), channelDim);
  if (!post.bias)
    return std::nullopt;
  return post;
}

std::string postOpsArguments(const KernelEmitter &e, const ContractionPostOps &post) {
  std::string text;
  if (post.bias)
    text += fmt::format("  g.post.bias = (const float *){} + {};\n", e.kernelAddress(post.bias->buffer), post.bias->offset);
  if (post.activation == KILN_ACTIVATION_RELU)
    text += "  g.post.activation = KILN_ACTIVATION_RELU;\n";
  if (post.activation == KILN_ACTIVATION_SILU)
    text += "  g.post.activation = KILN_ACTIVATION_SILU;\n";
  if (post.activation == KILN_ACTIVATION_CLIP)
    text += fmt::format("  g.post.activation = KILN_ACTIVATION_CLIP; g.post.lo = {}; g.post.hi = {};\n",
                        literal(DType::F32, post.lo), literal(DType::F32, post.hi));
  return text;
}

} // namespace kiln::codegen
