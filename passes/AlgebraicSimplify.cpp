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
#include "passes/AlgebraicSimplify.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <optional>
#include <unordered_set>

#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "passes/AlgebraicSimplifyPads.h"

namespace kiln::passes {

using ir::Builder;
using ir::Node;
using ir::OpKind;
using ir::Value;

namespace {

// ---- matching helpers -------------------------------------------------------------------------

const Tensor *constantOf(const Value *value) {
  const Node *producer = value->producer();
  return producer && producer->op() == OpKind::Constant ? &producer->attrTensor("value") : nullptr;
}

/// The value every element of a constant holds, bit for bit: at least one element, all equal
/// with the same sign (so [0.0, -0.0] is no splat: dividing by it gives +inf and -inf), NaN
/// never. Returned as a double, which holds any float element and small integers exactly.
std::optional<double> splatValue(const Value *value) {
  const Tensor *t = constantOf(value);
  if (!t || t->numElements() == 0)
    return std::nullopt;
  if (isFloat(t->dtype())) {
    double first = t->getDouble(0);
    for (int64_t i = 0; i < t->numElements(); ++i) {
      double element = t->getDouble(i);
      if (!(element == first) || std::signbit(element) != std::signbit(first)) // NaN fails at i = 0
        return std::nullopt;
    }
    return first;
  }
  int64_t first = t->getInt(0);
  for (int64_t i = 1; i < t->numElements(); ++i)
    if (t->getInt(i) != first)
      return std::nullopt;
  return static_cast<double>(first);
}

/// A constant with at least one element, every one equal to `x` in value (0.0 matches -0.0:
/// the identities accept a change in the sign of a zero, see AlgebraicSimplify.h).
bool isAll(const Value *value, double x) {
  const Tensor *t = constantOf(value);
  if (!t || t->numElements() == 0)
    return false;
  for (int64_t i = 0; i < t->numElements(); ++i) {
    bool equal = isFloat(t->dtype()) ? t->getDouble(i) == x : static_cast<double>(t->getInt(i)) == x;
    if (!equal)
      return false;
  }
  return true;
}

Node *producerIf(const Value *value, OpKind op) {
  Node *producer = value->producer();
  return producer && producer->op() == op ? producer : nullptr;
}

/// numpy broadcasting of several shapes; nullopt when they do not broadcast.
std::optional<Shape> broadcastAll(const std::vector<Shape> &shapes) {
  Shape out;
  for (const Shape &shape : shapes) {
    if (shape.size() > out.size())
      out.insert(out.begin(), shape.size() - out.size(), 1);
    size_t offset = out.size() - shape.size();
    for (size_t d = 0; d < shape.size(); ++d) {
      int64_t &dim = out[offset + d];
      if (dim == 1)
        dim = shape[d];
      else if (shape[d] != 1 && shape[d] != dim)
        return std::nullopt;
    }
  }
  return out;
}

/// numpy broadcast_to: `from` right-aligned against `to`, each dim 1 or equal.
bool broadcastsTo(const Shape &from, const Shape &to) {
  if (from.size() > to.size())
    return false;
  size_t offset = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d)
    if (from[d] != 1 && from[d] != to[offset + d])
      return false;
  return true;
}

// ---- building helpers -------------------------------------------------------------------------

/// `replacement` with the root's output type: itself when the types match, broadcast when only
/// its shape is smaller (x + zeros[4,3] with x f32[3] is x broadcast to [4,3]: a rule never
/// changes an output's type), nullptr when neither works.
Value *keepType(Builder &b, Value *replacement, const Node *root) {
  const TensorType &want = root->output()->type();
  if (replacement->type() == want)
    return replacement;
  if (replacement->dtype() != want.dtype || !broadcastsTo(replacement->shape(), want.shape))
    return nullptr;
  return b.create(OpKind::Broadcast, {replacement}, {{"shape", want.shape}});
}

/// A rank-0 constant holding element 0 of `t`, copied exactly (an i64 above 2^53 included).
Value *scalarFrom(Builder &b, const Tensor &t) {
  Tensor scalar(t.dtype(), Shape{});
  if (isFloat(t.dtype()))
    scalar.setDouble(0, t.getDouble(0));
  else
    scalar.setInt(0, t.getInt(0));
  return b.constant(scalar);
}

Value *unary(Builder &b, OpKind op, Value *x) { return b.create(op, {x}); }
Value *binary(Builder &b, OpKind op, Value *x, Value *y) { return b.create(op, {x, y}); }

std::vector<int64_t> normalizedPerm(const Node *permute) {
  std::vector<int64_t> perm = permute->attrInts("perm");
  for (int64_t &axis : perm)
    if (axis < 0)
      axis += static_cast<int64_t>(perm.size());
  return perm;
}

bool isIdentityPerm(const std::vector<int64_t> &perm) {
  for (size_t d = 0; d < perm.size(); ++d)
    if (perm[d] != static_cast<int64_t>(d))
      return false;
  return true;
}

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

// ---- movement -----------------------------------------------------------------------------------

// Output axis d of the outer permute reads axis outer[d] of the inner one, which reads axis
// inner[outer[d]] of x.
Value *permutePermute(Builder &b, Node *n) {
  Node *inner = producerIf(n->input(0), OpKind::Permute);
  if (!inner)
    return nullptr;
  std::vector<int64_t> innerPerm = normalizedPerm(inner), outerPerm = normalizedPerm(n), composed;
  for (int64_t axis : outerPerm)
    composed.push_back(innerPerm[axis]);
  if (isIdentityPerm(composed))
    return inner->input(0);
  return b.create(OpKind::Permute, {inner->input(0)}, {{"perm", composed}});
}

// (A B)^T = B^T A^T over the last two axes: a permute whose innermost axis is the product's
// row axis reads the product column by column; computing the transposed product instead makes
// that read contiguous (and the permute disappears when it was only the swap), while the
// operand transposes fold into the GEMM's strides or into permutes they already are.
// Autodiff's gradient of K in attention is (Q^T dS) permuted back to [batch, tokens, heads,
// dim], which otherwise gathered floats 128 apart in the kernel that joins Q, K and V's
// gradients. Only when the permute is the product's one reader, so nothing is computed twice.
Value *permuteOfMatMul(Builder &b, Node *n) {
  Node *product = producerIf(n->input(0), OpKind::MatMul);
  if (!product || product->output()->uses().size() != 1 || n->graph()->isOutput(product->output()))
    return nullptr;
  Value *a = product->input(0), *c = product->input(1);
  std::vector<int64_t> perm = normalizedPerm(n);
  const int64_t rank = static_cast<int64_t>(perm.size());
  if (rank < 2 || a->rank() < 2 || c->rank() < 2 || perm[rank - 1] != rank - 2)
    return nullptr;
  auto swapLastTwo = [](int64_t axis, int64_t r) { return axis == r - 1 ? r - 2 : axis == r - 2 ? r - 1 : axis; };
  auto transpose = [&](Value *x) {
    std::vector<int64_t> swap;
    for (int64_t d = 0; d < x->rank(); ++d)
      swap.push_back(swapLastTwo(d, x->rank()));
    return b.create(OpKind::Permute, {x}, {{"perm", swap}});
  };
  Value *swapped = b.create(OpKind::MatMul, {transpose(c), transpose(a)});
  std::vector<int64_t> rest;
  for (int64_t axis : perm)
    rest.push_back(swapLastTwo(axis, rank));
  return isIdentityPerm(rest) ? swapped : b.create(OpKind::Permute, {swapped}, {{"perm", rest}});
}

Value *permuteIdentity(Builder &, Node *n) { return isIdentityPerm(normalizedPerm(n)) ? n->input(0) : nullptr; }

bool isView(OpKind op) {
  return op == OpKind::Reshape || op == OpKind::Squeeze || op == OpKind::Unsqueeze || op == OpKind::Flatten;
}

// reshape, squeeze, unsqueeze and flatten only re-label a row-major buffer, so one that keeps
// the shape is its operand, and a chain of them is one reshape to the last shape.
Value *viewSameShape(Builder &, Node *n) {
  return n->input(0)->shape() == n->output()->shape() ? n->input(0) : nullptr;
}

Value *viewChain(Builder &b, Node *n) {
  Node *inner = n->input(0)->producer();
  if (!inner || !isView(inner->op()))
    return nullptr;
  Value *source = inner->input(0);
  if (source->shape() == n->output()->shape())
    return source;
  return b.create(OpKind::Reshape, {source}, {{"shape", n->output()->shape()}});
}

Value *broadcastSameShape(Builder &, Node *n) {
  return n->input(0)->shape() == n->output()->shape() ? n->input(0) : nullptr;
}

// broadcast_to(broadcast_to(x, s1), s2) = broadcast_to(x, s2): a dim of x is 1 or equals s1's,
// which is 1 or equals s2's.
Value *broadcastBroadcast(Builder &b, Node *n) {
  Node *inner = producerIf(n->input(0), OpKind::Broadcast);
  if (!inner)
    return nullptr;
  return keepType(b, inner->input(0), n);
}

Value *castSameDtype(Builder &, Node *n) {
  return ir::attrDType(n->attrs(), "to") == n->input(0)->dtype() ? n->input(0) : nullptr;
}

// A slice that keeps every dim's size takes everything unless it walks an axis of size > 1
// backwards (a reversal): going forward, count == dim forces start 0 and step 1.
Value *sliceEverything(Builder &, Node *n) {
  Value *x = n->input(0);
  if (x->shape() != n->output()->shape())
    return nullptr;
  const std::vector<int64_t> &axes = n->attrInts("axes"), &steps = n->attrInts("steps");
  for (size_t i = 0; i < n->attrInts("starts").size(); ++i) {
    int64_t axis = axes.empty() ? static_cast<int64_t>(i) : axes[i];
    if (axis < 0)
      axis += x->rank();
    if ((steps.empty() ? 1 : steps[i]) < 0 && x->shape()[axis] > 1)
      return nullptr;
  }
  return x;
}

// ---- operands of ops that broadcast numpy-style -------------------------------------------------

/// What an operand could shrink to: `source` itself, or (toScalar) a rank-0 copy of the splat
/// constant `source`.
struct Shrunk {
  Value *source = nullptr;
  bool toScalar = false;
};

/// Rebuilds `n` with each operand replaced by what `shrink` offers for it, where doing so keeps
/// the output shape (checked operand by operand); nullptr when no operand changes. Reading an
/// operand through numpy broadcasting gives the element an explicit broadcast would have
/// given, because both align shapes from the right.
template <typename ShrinkFn> Value *shrinkOperands(Builder &b, Node *n, ShrinkFn shrink) {
  std::vector<Value *> inputs = n->inputs();
  std::vector<Shape> shapes;
  for (Value *input : inputs)
    shapes.push_back(input->shape());
  std::vector<std::pair<size_t, Shrunk>> chosen;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::optional<Shrunk> candidate = shrink(inputs[i]);
    if (!candidate)
      continue;
    Shape kept = shapes[i];
    shapes[i] = candidate->toScalar ? Shape{} : candidate->source->shape();
    std::optional<Shape> out = broadcastAll(shapes);
    if (out && *out == n->output()->shape())
      chosen.emplace_back(i, *candidate);
    else
      shapes[i] = kept;
  }
  if (chosen.empty())
    return nullptr;
  for (auto &[i, shrunk] : chosen)
    inputs[i] = shrunk.toScalar ? scalarFrom(b, *constantOf(shrunk.source)) : shrunk.source;
  return b.create(n->op(), inputs, n->attrs());
}

// add(x, broadcast(y)) = add(x, y) when the output shape stays; a splat constant y (say
// f32[1,1] 0.5, or the zeros of an exported full_like) becomes a rank-0 constant.
Value *broadcastIntoConsumer(Builder &b, Node *n) {
  return shrinkOperands(b, n, [](Value *operand) -> std::optional<Shrunk> {
    Node *broadcast = producerIf(operand, OpKind::Broadcast);
    if (!broadcast)
      return std::nullopt;
    Value *source = broadcast->input(0);
    return Shrunk{source, source->rank() > 0 && splatValue(source).has_value()};
  });
}

// A splat constant operand with more than one element becomes a rank-0 constant.
Value *splatOperandToScalar(Builder &b, Node *n) {
  return shrinkOperands(b, n, [](Value *operand) -> std::optional<Shrunk> {
    if (operand->type().numElements() <= 1 || !splatValue(operand))
      return std::nullopt;
    return Shrunk{operand, true};
  });
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
      {"slice-everything", {OpKind::Slice}, sliceEverything},
      {"pad-nothing", {OpKind::Pad}, simplify::padNothing},
      {"add-adjacent-pads", {OpKind::Add}, simplify::addAdjacentPads},
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
