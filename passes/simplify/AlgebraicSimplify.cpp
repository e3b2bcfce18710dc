// simplify-algebra, in stages:
//  1. The rule table (rules() below) lists each rule with its name, the ops it is tried on and
//     a function that, given a node, either builds a replacement value (inserted just before the
//     node, so every operand is already defined) or returns nullptr.
//  2. One worklist starts with every node in graph order. A popped node is tried against its
//     op's rules in table order; the first replacement wins: the node's uses move to it, the
//     nodes the rule built and the users of the replacement are queued (they may match now: a
//     reshape whose operand became a reshape), and the node, with whatever only it kept alive,
//     is erased.
//  3. The run ends at a fixed point, when the worklist is empty. Every rule removes a node or
//     swaps one for a cheaper one (pow for mul, div for mul, a broadcast operand for its source),
//     so none can undo another; a budget proportional to the graph still bounds the run, and
//     its counter "iteration limit reached" would show a rule pair that loops.
//
// What "the same values" means, and the rules not made, are in AlgebraicSimplify.h.
#include "passes/simplify/AlgebraicSimplify.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <optional>
#include <unordered_set>

#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "passes/simplify/AlgebraicSimplifyMatch.h"
#include "passes/simplify/AlgebraicSimplifyMovement.h"
#include "passes/simplify/AlgebraicSimplifyPads.h"

namespace kiln::passes {

using ir::Builder;
using ir::Node;
using ir::OpKind;
using ir::Value;
using namespace simplify; // the shared matchers and the rules kept in their own files

namespace {

// ---- building helpers ---------------------------------------------------------------------------

Value *unary(Builder &b, OpKind op, Value *x) { return b.create(op, {x}); }
Value *binary(Builder &b, OpKind op, Value *x, Value *y) { return b.create(op, {x, y}); }

// ---- add, sub, mul, div -----------------------------------------------------------------------

// x + 0, 0 + x: for floats the result differs from x only in the sign of a zero.
Value *addZero(Builder &b, Node *n) {
  for (int i = 0; i < 2; ++i)
    if (isAll(n->input(1 - i), 0))
      return keepType(b, n->input(i), n);
  return nullptr;
}

Value *subZero(Builder &b, Node *n) { return isAll(n->input(1), 0) ? keepType(b, n->input(0), n) : nullptr; }

// 0 - x = neg(x), up to the sign of a zero (0 - 0 is +0, neg(0) is -0); exact for integers,
// whose wrapping subtraction from 0 is the wrapping negation.
Value *zeroMinus(Builder &b, Node *n) {
  return isAll(n->input(0), 0) ? keepType(b, unary(b, OpKind::Neg, n->input(1)), n) : nullptr;
}

Value *mulOne(Builder &b, Node *n) {
  for (int i = 0; i < 2; ++i)
    if (isAll(n->input(1 - i), 1))
      return keepType(b, n->input(i), n);
  return nullptr;
}

// x * -1 = neg(x) exactly, NaN, inf and zeros included; for integers both wrap alike.
Value *mulMinusOne(Builder &b, Node *n) {
  for (int i = 0; i < 2; ++i)
    if (isAll(n->input(1 - i), -1))
      return keepType(b, unary(b, OpKind::Neg, n->input(i)), n);
  return nullptr;
}

Value *divOne(Builder &b, Node *n) { return isAll(n->input(1), 1) ? keepType(b, n->input(0), n) : nullptr; }

// x * 0 = 0 for integers only: for floats NaN * 0 and inf * 0 are NaN, and -1 * 0 is -0.
Value *mulZeroInteger(Builder &b, Node *n) {
  if (!isInteger(n->output()->dtype()))
    return nullptr;
  for (int i = 0; i < 2; ++i)
    if (isAll(n->input(i), 0))
      return keepType(b, n->input(i), n); // the zero constant itself, broadcast if x is larger
  return nullptr;
}

// x - x = 0 for integers only: for floats inf - inf and NaN - NaN are NaN.
Value *subSelfInteger(Builder &b, Node *n) {
  if (!isInteger(n->output()->dtype()) || n->input(0) != n->input(1))
    return nullptr;
  return keepType(b, b.constant(Tensor(n->output()->dtype(), Shape{})), n);
}

// x / c = x * (1/c) when c is a power of two whose reciprocal the dtype holds: both sides are
// then the same real number rounded once, so they agree bit for bit (subnormal results too).
// For other c the two differ in the last bit for some x; that division stays.
Value *divPowerOfTwo(Builder &b, Node *n) {
  DType dtype = n->output()->dtype();
  std::optional<double> c = splatValue(n->input(1));
  if (!isFloat(dtype) || !c || *c == 0 || !std::isfinite(*c))
    return nullptr;
  int exponent = 0;
  if (std::fabs(std::frexp(*c, &exponent)) != 0.5)
    return nullptr;
  double reciprocal = 1.0 / *c; // exact in double: a power of two well inside its range
  if (Tensor::scalar(dtype, reciprocal).getDouble(0) != reciprocal)
    return nullptr;
  return keepType(b, binary(b, OpKind::Mul, n->input(0), b.scalar(dtype, reciprocal)), n);
}

/// The one value of a constant or an initialised parameter holding a single element.
std::optional<double> singleValue(const Value *v) {
  const Node *node = v->producer();
  if (!node || (node->op() != OpKind::Constant && node->op() != OpKind::Param) || v->type().numElements() != 1)
    return std::nullopt;
  const Tensor &value = node->attrTensor("value");
  return value.defined() && value.numElements() == 1 ? std::optional<double>(value.getDouble(0)) : std::nullopt;
}

/// Whether a and b are one value: the same, or single known values that are equal.
bool sameSingle(const Value *a, const Value *b) {
  if (a == b)
    return a->type().numElements() == 1;
  const std::optional<double> x = singleValue(a), y = singleValue(b);
  return x && y && *x == *y && a->dtype() == b->dtype();
}

/// quantize_linear(dequantize_linear(q, s, z), s, z) is q, of q's type, with one scale s and
/// one zero point z: (q - z) * s is within 2^-24 relative of the exact product, the division
/// by s within 2^-23 of q - z, at most 255 in magnitude, so the rounding gives q - z back.
/// Only where s is a known positive normal float whose 255-fold stays finite (an overflowed
/// product saturates; subnormal scales are left alone too, to keep the argument simple): ONNX
/// Runtime's QDQ models wrap pools and reshapes so, and quantized-max-pool leaves such a pair
/// in front of a byte pool.
Value *quantizeOfDequantize(Builder &, Node *n) {
  Node *dq = producerIf(n->input(0), OpKind::DequantizeLinear);
  if (!dq || dq->input(0)->type() != n->output()->type() || !sameSingle(dq->input(1), n->input(1)) ||
      !sameSingle(dq->input(2), n->input(2)))
    return nullptr;
  const std::optional<double> scale = singleValue(n->input(1));
  const bool normal = scale && std::isnormal(static_cast<float>(*scale)) &&
                      std::isfinite(static_cast<float>(std::fabs(*scale) * 255.0)) && *scale > 0;
  return normal ? dq->input(0) : nullptr;
}

/// cast<F>(cast<u8>(v)), v of float type F and the bytes read by nothing else (nor returned), is
/// where(isnan(v), 0, floor(clip(v, 0, 255))): the saturating cast (NaN to 0, the ends to the
/// type's range, truncation toward zero, which is floor on the non-negative clipped values)
/// computed in F, up to the sign of a zero (a clipped -0 stays -0, as x + 0 -> x allows). A
/// QDQ model's quantize_linear -> dequantize_linear inside one kernel (ONNX Runtime's quantizer
/// puts a pair after every Add) otherwise converts every element to bytes and back, which
/// GCC 12 does not vectorise ("control flow in loop"): ResNet-50 so quantized spent 7.4 ms in
/// one 1x1 layer's epilogue. Signed bytes are left alone: truncation is not floor below 0.
Value *widenedNarrowCast(Builder &b, Node *n) {
  const DType to = n->output()->dtype();
  Node *narrow = producerIf(n->input(0), OpKind::Cast);
  if (!narrow || !isFloat(to) || narrow->input(0)->dtype() != to || narrow->output()->dtype() != DType::U8 ||
      narrow->output()->uses().size() != 1 || narrow->graph()->isOutput(narrow->output()))
    return nullptr;
  Value *v = narrow->input(0);
  Value *clipped = b.create(OpKind::Clip, {v}, {{"min", 0.0}, {"max", 255.0}});
  return b.create(OpKind::Where, {unary(b, OpKind::IsNan, v), b.scalar(to, 0.0), unary(b, OpKind::Floor, clipped)});
}

// ---- unary pairs and powers -------------------------------------------------------------------

Value *negNeg(Builder &, Node *n) {
  Node *inner = producerIf(n->input(0), OpKind::Neg);
  return inner ? inner->input(0) : nullptr;
}

// Only f32 and f64: there the original's double rounding costs at most 1 ulp outside the
// overflow range, and the rewrite returns x exactly. In f16 and bf16 1/x rounds visibly (bf16
// keeps 8 bits) and overflows for |x| < 2^-16 (f16), so the graph's answer is kept.
Value *reciprocalReciprocal(Builder &, Node *n) {
  DType dtype = n->output()->dtype();
  Node *inner = producerIf(n->input(0), OpKind::Reciprocal);
  return inner && (dtype == DType::F32 || dtype == DType::F64) ? inner->input(0) : nullptr;
}

// pow(x, 2) = x * x: the evaluator's pow(x, 2.0) is exact like the product, and integer pow
// by squaring wraps exactly as the product does.
Value *powTwo(Builder &b, Node *n) {
  Value *x = n->input(0);
  return isAll(n->input(1), 2) ? keepType(b, binary(b, OpKind::Mul, x, x), n) : nullptr;
}

// pow(x, 0.5) = sqrt(x) except at x = -inf (pow gives +inf, sqrt NaN) and the sign of -0.
Value *powHalf(Builder &b, Node *n) {
  if (!isFloat(n->output()->dtype()) || !isAll(n->input(1), 0.5))
    return nullptr;
  return keepType(b, unary(b, OpKind::Sqrt, n->input(0)), n);
}

Value *powOne(Builder &b, Node *n) { return isAll(n->input(1), 1) ? keepType(b, n->input(0), n) : nullptr; }

// The scale of attention exports, x * (1/sqrt(d)), x * rsqrt(d) or x / sqrt(d) with d a
// constant, reaches one op by a constant through this rule: sqrt, rsqrt, reciprocal, mul and
// div of splat constants fold into a constant. The evaluator computes the folded element, so
// it is the value every element had. Only splats of these few ops: general constant folding
// is its own pass, this keeps the idiom's fixed point inside one run.
Value *foldSplatConstants(Builder &b, Node *n) {
  const TensorType &outType = n->output()->type();
  if (!isFloat(outType.dtype))
    return nullptr;
  std::vector<Tensor> scalars;
  int64_t largestOperand = 0;
  for (Value *input : n->inputs()) {
    if (!splatValue(input))
      return nullptr;
    scalars.push_back(Tensor::scalar(input->dtype(), *splatValue(input)));
    largestOperand = std::max(largestOperand, input->type().numElements());
  }
  Tensor folded = ir::evaluateOp(n->op(), scalars, n->attrs(), {TensorType{outType.dtype, {}}})[0];
  // A constant of the full output shape unless that is larger than what it replaces.
  if (outType.numElements() > largestOperand)
    return keepType(b, b.constant(folded), n);
  Tensor full(outType);
  for (int64_t i = 0; i < full.numElements(); ++i)
    full.setDouble(i, folded.getDouble(0));
  return b.constant(full);
}

// ---- the table ----------------------------------------------------------------------------------

using RuleFn = Value *(*)(Builder &, Node *);

struct Rule {
  const char *name;
  std::vector<OpKind> ops;
  RuleFn apply;
};

// Per op, rules are tried in this order: identities before the rewrites that only shrink an
// operand, so x + zeros[4,3] becomes x rather than x + 0.
const std::vector<Rule> &rules() {
  static const std::vector<OpKind> kNumpyBroadcast = {OpKind::Add, OpKind::Sub, OpKind::Mul,  OpKind::Div, OpKind::Pow,
                                                      OpKind::Max, OpKind::Min, OpKind::Mod,  OpKind::Eq,  OpKind::Ne,
                                                      OpKind::Lt,  OpKind::Le,  OpKind::Ge,   OpKind::Gt,  OpKind::And,
                                                      OpKind::Or,  OpKind::Xor, OpKind::Where};
  static const std::vector<OpKind> kViews = {OpKind::Reshape, OpKind::Squeeze, OpKind::Unsqueeze, OpKind::Flatten};
  static const std::vector<Rule> table = {
      {"fold-splat-constants",
       {OpKind::Sqrt, OpKind::Rsqrt, OpKind::Reciprocal, OpKind::Mul, OpKind::Div},
       foldSplatConstants},
      {"add-zero", {OpKind::Add}, addZero},
      {"sub-zero", {OpKind::Sub}, subZero},
      {"zero-minus", {OpKind::Sub}, zeroMinus},
      {"sub-self-integer", {OpKind::Sub}, subSelfInteger},
      {"mul-one", {OpKind::Mul}, mulOne},
      {"mul-zero-integer", {OpKind::Mul}, mulZeroInteger},
      {"mul-minus-one", {OpKind::Mul}, mulMinusOne},
      {"div-one", {OpKind::Div}, divOne},
      {"div-power-of-two", {OpKind::Div}, divPowerOfTwo},
      {"quantize-of-dequantize", {OpKind::QuantizeLinear}, quantizeOfDequantize},
      {"pow-one", {OpKind::Pow}, powOne},
      {"pow-two", {OpKind::Pow}, powTwo},
      {"pow-half", {OpKind::Pow}, powHalf},
      {"neg-neg", {OpKind::Neg}, negNeg},
      {"reciprocal-reciprocal", {OpKind::Reciprocal}, reciprocalReciprocal},
      {"permute-identity", {OpKind::Permute}, permuteIdentity},
      {"permute-permute", {OpKind::Permute}, permutePermute},
      {"permute-of-matmul", {OpKind::Permute}, permuteOfMatMul},
      {"view-same-shape", kViews, viewSameShape},
      {"view-chain", kViews, viewChain},
      {"broadcast-same-shape", {OpKind::Broadcast}, broadcastSameShape},
      {"broadcast-broadcast", {OpKind::Broadcast}, broadcastBroadcast},
      {"cast-same-dtype", {OpKind::Cast}, castSameDtype},
      {"widened-narrow-cast", {OpKind::Cast}, widenedNarrowCast},
      {"slice-everything", {OpKind::Slice}, sliceEverything},
      {"pad-nothing", {OpKind::Pad}, simplify::padNothing},
      {"add-adjacent-pads", {OpKind::Add}, simplify::addAdjacentPads},
      {"avg-pool-of-zero-pad", {OpKind::AvgPool}, simplify::avgPoolOfZeroPad},
      {"broadcast-into-consumer", kNumpyBroadcast, broadcastIntoConsumer},
      {"splat-operand-to-scalar", kNumpyBroadcast, splatOperandToScalar},
  };
  return table;
}

// ---- the driver ---------------------------------------------------------------------------------

/// Nodes to try, first in first out, each at most once at a time. The set is the truth: an
/// entry of an erased node is forgotten there and skipped when it comes up.
class Worklist {
public:
  void push(Node *node) {
    if (queued_.insert(node).second)
      order_.push_back(node);
  }
  Node *pop() {
    while (!order_.empty()) {
      Node *node = order_.front();
      order_.pop_front();
      if (queued_.erase(node))
        return node;
    }
    return nullptr;
  }
  void forget(Node *node) { queued_.erase(node); }

private:
  std::deque<Node *> order_;
  std::unordered_set<Node *> queued_; // membership only, never iterated: order stays deterministic
};

/// Erases `root` if nothing uses it, then each producer that thereby lost its last use.
void eraseIfDead(ir::Graph &graph, Node *root, Worklist &worklist) {
  std::vector<Node *> stack{root};
  while (!stack.empty()) {
    Node *node = stack.back();
    stack.pop_back();
    bool used = false;
    for (Value *output : node->outputs())
      used = used || output->hasUses();
    if (used)
      continue;
    std::vector<Node *> producers;
    for (Value *input : node->inputs())
      if (Node *producer = input->producer())
        producers.push_back(producer);
    worklist.forget(node);
    graph.eraseNode(node);
    // A node sits on the stack at most once, so none is popped after it was erased.
    for (Node *producer : producers)
      if (std::find(stack.begin(), stack.end(), producer) == stack.end())
        stack.push_back(producer);
  }
}

/// The nodes strictly between `after` (nullptr: the start) and `before`, in order.
std::vector<Node *> nodesBetween(ir::Graph &graph, Node *after, Node *before) {
  std::vector<Node *> nodes;
  for (Node *node = after ? after->next() : graph.firstNode(); node && node != before; node = node->next())
    nodes.push_back(node);
  return nodes;
}

// Bound on rewrites per run: far above what the rules need (each removes or cheapens a node).
constexpr int64_t kRewritesPerNode = 8;
constexpr int64_t kMinRewrites = 64;

class AlgebraicSimplifyPass final : public Pass {
public:
  std::string_view name() const override { return "simplify-algebra"; }

  bool run(ir::Graph &graph, PassContext &context) override {
    std::vector<std::vector<const Rule *>> rulesByOp(ir::kNumOps);
    for (const Rule &rule : rules())
      for (OpKind op : rule.ops)
        rulesByOp[static_cast<size_t>(op)].push_back(&rule);

    Worklist worklist;
    for (Node *node : graph.nodes())
      worklist.push(node);
    ir::Builder builder(graph);
    int64_t budget = kRewritesPerNode * static_cast<int64_t>(graph.numNodes()) + kMinRewrites;
    bool changed = false;
    while (Node *node = worklist.pop()) {
      // A node nothing reads is dead code, dce's to remove; skipping it also keeps the
      // replacement alive below, since it inherits the node's readers.
      if (node->numOutputs() != 1 || !node->output()->hasUses())
        continue;
      for (const Rule *rule : rulesByOp[static_cast<size_t>(node->op())]) {
        Node *previous = node->prev();
        builder.setInsertionPoint(node);
        Value *replacement = rule->apply(builder, node);
        std::vector<Node *> created = nodesBetween(graph, previous, node);
        if (!replacement) {
          // A rule that gave up after building something leaves nothing behind; users come
          // after their operands, so erasing backwards meets each one unused.
          for (auto it = created.rbegin(); it != created.rend(); ++it)
            if (!(*it)->output()->hasUses())
              graph.eraseNode(*it);
          continue;
        }
        context.stats.add(std::string("rule ") + rule->name);
        Value *old = node->output();
        std::string name = old->name();
        old->replaceAllUsesWith(replacement);
        eraseIfDead(graph, node, worklist);
        if (replacement->name().empty())
          replacement->setName(std::move(name)); // keeps a named output's name
        for (Node *added : created)
          worklist.push(added);
        for (const ir::Use &use : replacement->uses())
          worklist.push(use.user);
        changed = true;
        if (--budget == 0) {
          context.stats.add("iteration limit reached");
          return true;
        }
        break; // the node is gone
      }
    }
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createAlgebraicSimplifyPass() { return std::make_unique<AlgebraicSimplifyPass>(); }

} // namespace kiln::passes
