// accumulatedOperand (AccumulatedOperand.h): a structural match on the kernel's body.
#include "passes/fusion/AccumulatedOperand.h"

#include <algorithm>

namespace kiln::passes {

namespace {

using ir::OpKind;

/// Whether `conv` is a pointwise f32 convolution: every kernel extent 1, strides 1, pads 0.
bool pointwiseConv(const ir::Node &conv) {
  if (conv.op() != OpKind::Conv || conv.output()->dtype() != DType::F32)
    return false;
  const Shape &weights = conv.input(1)->shape();
  if (weights.size() < 3)
    return false;
  const std::vector<int64_t> &strides = conv.attrInts("strides"), &pads = conv.attrInts("pads");
  return std::all_of(weights.begin() + 2, weights.end(), [](int64_t extent) { return extent == 1; }) &&
         std::all_of(strides.begin(), strides.end(), [](int64_t s) { return s == 1; }) &&
         std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
}

/// X of `X + r`: the output of a pointwise convolution, alone or plus a value that does not
/// come from it.
bool convPlusOther(const ir::Value *x) {
  const ir::Node *producer = x->producer();
  if (!producer)
    return false;
  if (producer->op() == OpKind::Conv)
    return pointwiseConv(*producer);
  if (producer->op() != OpKind::Add)
    return false;
  for (int side = 0; side < 2; ++side) {
    const ir::Value *conv = producer->input(side);
    if (conv->producer() && conv->producer()->op() == OpKind::Conv && conv->uses().size() == 1 &&
        conv->type() == x->type() && producer->input(1 - side) != conv)
      return pointwiseConv(*conv->producer());
  }
  return false;
}

/// The body's `X + r` node and r's body-input index, or {nullptr, -1}: the result (or the
/// relu it goes through) is one add, and one side of it is the body input r.
struct ResidualAdd {
  const ir::Node *add = nullptr;
  int operand = -1;
};

ResidualAdd residualAdd(const ir::Graph &body) {
  if (body.outputs().size() != 1)
    return {};
  const ir::Value *result = body.outputs()[0];
  const ir::Node *add = result->producer();
  if (add && add->op() == OpKind::Relu)
    add = add->input(0)->uses().size() == 1 ? add->input(0)->producer() : nullptr;
  if (!add || add->op() != OpKind::Add || add->output()->type() != result->type())
    return {};
  const std::vector<ir::Value *> &inputs = body.inputs();
  for (int side = 0; side < 2; ++side) {
    const ir::Value *r = add->input(side);
    const auto at = std::find(inputs.begin(), inputs.end(), r);
    if (at != inputs.end() && r->uses().size() == 1 && r->type() == result->type() && !body.isOutput(r) &&
        add->input(1 - side)->type() == r->type() && convPlusOther(add->input(1 - side)))
      return {add, static_cast<int>(at - inputs.begin())};
  }
  return {};
}

} // namespace

int accumulatedOperand(const ir::Node &kernel) {
  const ir::Graph *body = kernel.body();
  if (kernel.op() != OpKind::Kernel || !body || kernel.numOutputs() != 1 || !kernel.hasAttr("rule") ||
      kernel.attrString("rule") != "contraction+epilogue")
    return -1;
  // The convolution must be the body's only node that is not elementwise, broadcast or
  // injective (codegen's anchor, whose epilogue computes the rest).
  int anchors = 0;
  for (const ir::Node *node : body->nodes()) {
    const ir::FusionKind fusion = ir::opTraits(node->op()).fusion;
    if (fusion != ir::FusionKind::Elementwise && fusion != ir::FusionKind::Broadcast &&
        fusion != ir::FusionKind::Injective)
      anchors += node->op() == OpKind::Conv ? 1 : 2;
  }
  if (anchors != 1)
    return -1;
  return residualAdd(*body).operand;
}

AccumulatedAdd accumulatedAdd(const ir::Graph &body, int operand) {
  const ResidualAdd match = residualAdd(body);
  if (!match.add || match.operand != operand)
    return {};
  const ir::Value *r = body.inputs()[static_cast<size_t>(operand)];
  return {match.add, match.add->input(0) == r ? match.add->input(1) : match.add->input(0)};
}

} // namespace kiln::passes
