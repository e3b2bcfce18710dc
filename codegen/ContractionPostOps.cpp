// Contraction epilogues as post ops (ContractionPostOps.h).
#include "codegen/ContractionPostOps.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

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

/// The value of a one-element f32 constant (inlined or a body constant, possibly broadcast).
std::optional<double> scalarConstant(const KernelPlan &plan, const ir::Value *value) {
  while (value->producer() && (value->producer()->op() == OpKind::Broadcast || value->producer()->op() == OpKind::Reshape))
    value = value->producer()->input(0);
  auto found = plan.bufferOf.find(value);
  if (value->dtype() != DType::F32 || found == plan.bufferOf.end())
    return std::nullopt;
  const KernelBuffer &buffer = plan.buffers.at(static_cast<size_t>(found->second));
  if (buffer.kind != KernelBuffer::Kind::Constant || buffer.constant.numElements() != 1)
    return std::nullopt;
  return buffer.constant.getDouble(0);
}

/// The operand of commutative binary `node` (of kind `op`) other than one satisfying
/// `isFirst`, with that one: {first, other}, or nulls.
template <typename Pred>
std::pair<const ir::Value *, const ir::Value *> operandsOf(const ir::Node *node, OpKind op, Pred isFirst) {
  if (!node || node->op() != op)
    return {nullptr, nullptr};
  for (int i = 0; i < 2; ++i)
    if (isFirst(node->input(i)))
      return {node->input(i), node->input(1 - i)};
  return {nullptr, nullptr};
}

/// hard_sigmoid's decomposition, clip(x * alpha + beta, 0, 1): its x, with alpha and beta.
const ir::Value *hardSigmoidInput(const KernelPlan &plan, const ir::Value *gate, ContractionPostOps &post) {
  const ir::Node *clip = gate->producer();
  if (!clip || clip->op() != OpKind::Clip || clip->attrFloat("min") != 0.0 || clip->attrFloat("max") != 1.0)
    return nullptr;
  auto isConstant = [&](const ir::Value *v) { return scalarConstant(plan, v).has_value(); };
  auto [beta, line] = operandsOf(clip->input(0)->producer(), OpKind::Add, isConstant);
  if (!line)
    return nullptr;
  auto [alpha, x] = operandsOf(line->producer(), OpKind::Mul, isConstant);
  if (!x)
    return nullptr;
  post.alpha = *scalarConstant(plan, alpha), post.beta = *scalarConstant(plan, beta);
  return x;
}

/// hard_swish's decomposition, where(eq(g, 0), 0, x * g) with g its hard sigmoid: its x.
const ir::Value *hardSwishInput(const KernelPlan &plan, const ir::Node *where, ContractionPostOps &post) {
  auto isZero = [&](const ir::Value *v) { return scalarConstant(plan, v) == std::optional<double>(0.0); };
  if (where->op() != OpKind::Where || !isZero(where->input(1)))
    return nullptr;
  auto [zero, gate] = operandsOf(where->input(0)->producer(), OpKind::Eq, isZero);
  if (!gate)
    return nullptr;
  auto [g, x] = operandsOf(where->input(2)->producer(), OpKind::Mul, [&](const ir::Value *v) { return v == gate; });
  if (!x || hardSigmoidInput(plan, gate, post) != x)
    return nullptr;
  return x;
}

/// Whether `value` is a scalar constant within a float's rounding of `expected`.
bool isConstantNear(const KernelPlan &plan, const ir::Value *value, double expected) {
  const std::optional<double> c = scalarConstant(plan, value);
  return c && std::abs(*c - expected) <= 1e-6 * std::abs(expected);
}

/// The leaves of a tree of muls, two levels deep.
void productFactors(const ir::Value *value, int depth, std::vector<const ir::Value *> &factors) {
  const ir::Node *node = value->producer();
  if (depth < 2 && node && node->op() == OpKind::Mul) {
    productFactors(node->input(0), depth + 1, factors);
    productFactors(node->input(1), depth + 1, factors);
  } else {
    factors.push_back(value);
  }
}

/// GELU as decompose spells it ((x * 0.5) * (erf(x * sqrt(1/2)) + 1)) or as PyTorch exports
/// it ((x * (erf(x / sqrt 2) + 1)) * 0.5), the three factors in any order: its x.
const ir::Value *geluInput(const KernelPlan &plan, const ir::Value *value) {
  std::vector<const ir::Value *> factors;
  productFactors(value, 0, factors);
  if (factors.size() != 3)
    return nullptr;
  auto isOne = [&](const ir::Value *v) { return isConstantNear(plan, v, 1.0); };
  const ir::Value *half = nullptr, *erfValue = nullptr, *x = nullptr;
  for (const ir::Value *factor : factors) {
    const ir::Value *erfOperand = operandsOf(factor->producer(), OpKind::Add, isOne).second;
    if (!half && isConstantNear(plan, factor, 0.5))
      half = factor;
    else if (!erfValue && erfOperand && erfOperand->producer() && erfOperand->producer()->op() == OpKind::Erf)
      erfValue = erfOperand;
    else
      x = factor;
  }
  if (!half || !erfValue || !x)
    return nullptr;
  const ir::Node *scaled = erfValue->producer()->input(0)->producer();
  if (!scaled || scaled->input(0) != x)
    return nullptr;
  if (scaled->op() == OpKind::Mul && isConstantNear(plan, scaled->input(1), 0.70710678118654752))
    return x;
  if (scaled->op() == OpKind::Div && isConstantNear(plan, scaled->input(1), 1.41421356237309505))
    return x;
  return nullptr;
}

/// Whether `value` is the product `tile` or the product plus a bias: what a residual is added to.
bool isProductOrBiased(const ir::Value *value, const ir::Value *tile) {
  const ir::Node *add = value->producer();
  return value == tile || (add && add->op() == OpKind::Add && (add->input(0) == tile || add->input(1) == tile));
}

/// A read of `value`, shaped as the product, laid out densely (row-major) in its buffer.
std::optional<StridedAccess> denseAccess(const KernelPlan &plan, int stageIndex, const ir::Value &value,
                                         const Shape &shape) {
  if (value.shape() != shape)
    return std::nullopt;
  std::optional<StridedAccess> access = stridedAccess(plan, stageIndex, value);
  int64_t stride = 1;
  for (size_t d = shape.size(); access && d-- > 0; stride *= shape[d])
    if (shape[d] > 1 && access->strides[d] != stride)
      return std::nullopt;
  return access;
}

/// A C expression of one-element f32 `value` as the stage reads it: its literal when a
/// constant, else a load from its buffer; nothing when it is neither.
std::optional<std::string> scalarOperand(const KernelEmitter &e, int stageIndex, const ir::Value *value) {
  if (value->dtype() != DType::F32 || value->type().numElements() != 1)
    return std::nullopt;
  if (std::optional<double> constant = scalarConstant(e.plan(), value))
    return literal(DType::F32, *constant);
  std::optional<StridedAccess> access = stridedAccess(e.plan(), stageIndex, *value);
  if (!access)
    return std::nullopt;
  return fmt::format("((const float *){})[{}]", e.kernelAddress(access->buffer), access->offset);
}

/// `value` as the dequantize_linear of a dense u8 or i8 tensor of `shape` with f32 scalar scale
/// and zero point, as decompose spells it: mul(sub(cast(q), zero), scale), the mul either way
/// round, or mul(cast(q), scale) where simplify-algebra dropped a constant zero point of 0.
std::optional<BytesAddend> bytesAddend(const KernelEmitter &e, int stageIndex, const ir::Value *value,
                                       const Shape &shape) {
  auto isCentred = [](const ir::Value *v) {
    const ir::Node *n = v->producer();
    return n && (n->op() == OpKind::Sub || n->op() == OpKind::Cast);
  };
  auto [centred, scale] = operandsOf(value->producer(), OpKind::Mul, isCentred);
  if (!centred || centred->shape() != shape)
    return std::nullopt;
  const ir::Node *cast = centred->producer();
  std::optional<std::string> zero = literal(DType::F32, 0.0);
  if (cast->op() == OpKind::Sub) {
    zero = scalarOperand(e, stageIndex, cast->input(1));
    cast = cast->input(0)->producer();
  }
  if (!zero || !cast || cast->op() != OpKind::Cast || cast->output()->dtype() != DType::F32)
    return std::nullopt;
  const ir::Value *bytes = cast->input(0);
  if (bytes->dtype() != DType::U8 && bytes->dtype() != DType::I8)
    return std::nullopt;
  std::optional<StridedAccess> access = denseAccess(e.plan(), stageIndex, *bytes, shape);
  std::optional<std::string> scaleCode = scalarOperand(e, stageIndex, scale);
  if (!access || !scaleCode)
    return std::nullopt;
  return BytesAddend{*access, bytes->dtype() == DType::I8, *scaleCode, *zero};
}

/// The post ops that make `value` of the stage's product, or nothing; with `addendAllowed`, a
/// residual added after the bias (and before the activation) too.
std::optional<ContractionPostOps> postOpsOf(const KernelEmitter &e, int stageIndex, const ir::Value *value,
                                            size_t channelDim, bool addendAllowed) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const ir::Value *anchor = stage.anchor->output();
  ContractionPostOps post;
  if (value == anchor)
    return post;
  if (value->dtype() != DType::F32 || !value->producer())
    return std::nullopt;
  const ir::Node *node = value->producer();
  if (const ir::Value *x = geluInput(e.plan(), value)) {
    post.activation = KILN_ACTIVATION_GELU;
    value = x;
  } else if (const ir::Value *x = hardSigmoidInput(e.plan(), value, post)) {
    post.activation = KILN_ACTIVATION_HARD_SIGMOID;
    value = x;
  } else if (const ir::Value *x = hardSwishInput(e.plan(), node, post)) {
    post.activation = KILN_ACTIVATION_HARD_SWISH;
    value = x;
  } else if (node->op() == OpKind::Relu || node->op() == OpKind::Clip) {
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
  // A residual r: (product + bias) + r, either way round; r f32 or dequantized bytes.
  if (const ir::Node *add = value->producer(); addendAllowed && add && add->op() == OpKind::Add)
    for (int i = 0; i < 2 && !post.addend && !post.addendBytes; ++i)
      if (isProductOrBiased(add->input(i), anchor)) {
        const ir::Value *residual = add->input(1 - i);
        if (residual->dtype() == DType::F32)
          post.addend = denseAccess(e.plan(), stageIndex, *residual, anchor->shape());
        if (!post.addend)
          post.addendBytes = bytesAddend(e, stageIndex, residual, anchor->shape());
        if (post.addend || post.addendBytes)
          value = add->input(i);
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
  if (value->shape() != anchor->shape())
    return std::nullopt;
  const ir::Value *bias = operandsOf(node, OpKind::Add, [&](const ir::Value *v) { return v == tile; }).second;
  if (!bias || bias == tile)
    return std::nullopt;
  post.bias = channelBias(e.plan(), stageIndex, *bias, anchor->shape(), channelDim);
  if (!post.bias)
    return std::nullopt;
  return post;
}

} // namespace

std::optional<ContractionPostOps> matchPostOps(const KernelEmitter &e, int stageIndex, size_t channelDim,
                                               bool addendAllowed) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  if (stage.stores.size() != 1 || stage.stores[0].buffer != stage.tileBuffer ||
      stage.stores[0].value == stage.anchor->output())
    return std::nullopt;
  return postOpsOf(e, stageIndex, stage.stores[0].value, channelDim, addendAllowed);
}

std::optional<QuantizedStore> matchQuantizedStore(const KernelEmitter &e, int stageIndex, size_t channelDim) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  // One store of bytes, and perhaps the f32 value they quantize into the product's buffer.
  if (stage.stores.empty() || stage.stores.size() > 2)
    return std::nullopt;
  const bool bytesFirst = stage.stores.size() == 1 || stage.stores[0].buffer != stage.tileBuffer;
  const Store &bytes = stage.stores[bytesFirst ? 0 : 1];
  const Store *kept = stage.stores.size() == 2 ? &stage.stores[bytesFirst ? 1 : 0] : nullptr;
  if (bytes.buffer == stage.tileBuffer || (kept && kept->buffer != stage.tileBuffer))
    return std::nullopt;
  // quantize_linear as decompose spells it: cast(add(round(div(v, scale)), zero)) to u8 or i8.
  const ir::Value *stored = bytes.value;
  const ir::Node *cast = stored->producer();
  if (!cast || cast->op() != OpKind::Cast || (stored->dtype() != DType::U8 && stored->dtype() != DType::I8) ||
      stored->shape() != stage.anchor->output()->shape())
    return std::nullopt;
  auto isRounded = [](const ir::Value *v) { return v->producer() && v->producer()->op() == OpKind::Round; };
  auto [rounded, zero] = operandsOf(cast->input(0)->producer(), OpKind::Add, isRounded);
  if (!rounded)
    return std::nullopt;
  // v / scale, or v * c where simplify-algebra turned the division by a power of two into a
  // product with its reciprocal (then v / (1 / c) is the same value, exactly).
  const ir::Node *divide = rounded->producer()->input(0)->producer();
  if (!divide || divide->output()->shape() != stored->shape())
    return std::nullopt;
  const ir::Value *v = nullptr;
  std::optional<std::string> scaleCode;
  if (divide->op() == OpKind::Div) {
    v = divide->input(0), scaleCode = scalarOperand(e, stageIndex, divide->input(1));
  } else if (divide->op() == OpKind::Mul) {
    auto isPowerOfTwo = [&](const ir::Value *c) {
      const std::optional<double> value = scalarConstant(e.plan(), c);
      int exponent = 0;
      return value && *value > 0 && std::frexp(*value, &exponent) == 0.5 &&
             1.0 / *value <= std::numeric_limits<float>::max();
    };
    auto [factor, x] = operandsOf(divide, OpKind::Mul, isPowerOfTwo);
    if (factor)
      v = x, scaleCode = literal(DType::F32, 1.0 / *scalarConstant(e.plan(), factor));
  }
  if (!v || (kept && kept->value != v))
    return std::nullopt;
  QuantizedStore store;
  std::optional<std::string> zeroCode = scalarOperand(e, stageIndex, zero);
  std::optional<ContractionPostOps> post = postOpsOf(e, stageIndex, v, channelDim, true);
  // Bytes written over the residual they are computed from would clobber other tiles' floats.
  if (!scaleCode || !zeroCode || !post || (post->addend && post->addend->buffer == bytes.buffer))
    return std::nullopt;
  // A bytes residual in the stored bytes' buffer: each output reads its own byte before it is
  // stored, so only the same layout is sound.
  if (post->addendBytes && post->addendBytes->bytes.buffer == bytes.buffer && post->addendBytes->bytes.offset != 0)
    return std::nullopt;
  store.post = *post, store.scale = *scaleCode, store.zero = *zeroCode;
  store.output = bytes.buffer;
  store.isSigned = stored->dtype() == DType::I8;
  store.keepF32 = kept != nullptr;
  return store;
}

std::string quantizedStoreArguments(const KernelEmitter &e, const QuantizedStore &store) {
  return postOpsArguments(e, store.post) +
         fmt::format("  g.quantized.q = {}; g.quantized.is_signed = {};\n  g.quantized.scale = {}; "
                     "g.quantized.zero = {};\n",
                     e.kernelAddress(store.output), store.isSigned ? 1 : 0, store.scale, store.zero) +
         (store.keepF32 ? "  g.quantized.keep_f32 = 1;\n" : "");
}

std::string postOpsArguments(const KernelEmitter &e, const ContractionPostOps &post) {
  std::string text;
  if (post.bias)
    text += fmt::format("  g.post.bias = (const float *){} + {};\n", e.kernelAddress(post.bias->buffer), post.bias->offset);
  if (post.addend)
    text += fmt::format("  g.addend = (const float *){} + {};\n", e.kernelAddress(post.addend->buffer),
                        post.addend->offset);
  if (const std::optional<BytesAddend> &bytes = post.addendBytes)
    text += fmt::format("  g.addend_q.q = (const char *){} + {}; g.addend_q.is_signed = {};\n"
                        "  g.addend_q.scale = {}; g.addend_q.zero = {};\n",
                        e.kernelAddress(bytes->bytes.buffer), bytes->bytes.offset, bytes->isSigned ? 1 : 0,
                        bytes->scale, bytes->zero);
  if (post.activation == KILN_ACTIVATION_RELU)
    text += "  g.post.activation = KILN_ACTIVATION_RELU;\n";
  if (post.activation == KILN_ACTIVATION_SILU)
    text += "  g.post.activation = KILN_ACTIVATION_SILU;\n";
  if (post.activation == KILN_ACTIVATION_GELU)
    text += "  g.post.activation = KILN_ACTIVATION_GELU;\n";
  if (post.activation == KILN_ACTIVATION_HARD_SIGMOID || post.activation == KILN_ACTIVATION_HARD_SWISH)
    text += fmt::format("  g.post.activation = KILN_ACTIVATION_{}; g.post.alpha = {}; g.post.beta = {};\n",
                        post.activation == KILN_ACTIVATION_HARD_SWISH ? "HARD_SWISH" : "HARD_SIGMOID",
                        literal(DType::F32, post.alpha), literal(DType::F32, post.beta));
  if (post.activation == KILN_ACTIVATION_CLIP)
    text += fmt::format("  g.post.activation = KILN_ACTIVATION_CLIP; g.post.lo = {}; g.post.hi = {};\n",
                        literal(DType::F32, post.lo), literal(DType::F32, post.hi));
  return text;
}

} // namespace kiln::codegen
