// quantized-max-pool: a max_pool whose only reader is quantize_linear(., s, z), with s one known
// scale, finite and positive, and z one known zero point, is moved behind the quantize:
//   quantize_linear(max_pool(x), s, z)  ->  max_pool(quantize_linear(x, s, z))
// also through reshapes between the two, which then reshape the bytes.
// (kiln-quantize leaves MaxPool in float and quantizes its output for the next layer: VGG16's
// pools read 4 bytes a value and a separate kernel quantized their results.)
//
// Exact, bit for bit, wherever x holds no NaN: quantize_linear is then monotone (a division by
// a positive scale, rounding, adding z and saturating never reverse an order), so the largest
// value quantizes to the largest byte. Padding and windows with no tap inside agree too: -inf
// never wins in f32 and quantizes to the type's lowest value, which the byte pool pads with.
// A NaN would win the f32 window and quantize to 0, so x must be provably finite
// (FiniteBound.h: e.g. relu(qconv(...) + bias)).
//
// Runs after quantized-conv, whose qconv it reads the bound of, before decompose expands the
// quantize. Statistics: "max pools on int8".
#include "passes/quantize/QuantizedMaxPool.h"

#include <cmath>
#include <vector>

#include "ir/Builder.h"
#include "passes/quantize/FiniteBound.h"
#include "passes/quantize/QuantizedOperands.h"

namespace kiln::passes {

using ir::Node;
using ir::OpKind;
using ir::Value;

namespace {

using namespace quantize;

/// The quantize_linear that alone reads `pooled`, directly or through reshapes that alone read
/// it (a flatten before a classifier), with one positive finite scale and one zero point known
/// when compiling; the reshapes go to `reshapes`, first first.
Node *soleQuantize(const ir::Graph &graph, const Value *pooled, std::vector<Node *> &reshapes) {
  const Value *v = pooled;
  for (;;) {
    if (v->uses().size() != 1 || graph.isOutput(v))
      return nullptr;
    Node *user = v->uses()[0].user;
    if (user->op() != OpKind::Reshape)
      break;
    reshapes.push_back(user);
    v = user->output();
  }
  Node *q = v->uses()[0].user;
  if (q->op() != OpKind::QuantizeLinear || q->input(0) != v)
    return nullptr;
  std::optional<Tensor> scale = knownValue(q->input(1)), zero = knownValue(q->input(2));
  if (!scale || !zero || scale->numElements() != 1 || zero->numElements() != 1)
    return nullptr;
  const double s = scale->getDouble(0);
  return std::isfinite(s) && s > 0 ? q : nullptr;
}

bool rewrite(ir::Graph &graph, Node *pool, FiniteBound &bounds) {
  if (pool->output()->dtype() != DType::F32)
    return false;
  std::vector<Node *> reshapes;
  Node *q = soleQuantize(graph, pool->output(), reshapes);
  if (!q || !bounds.of(pool->input(0)))
    return false;
  ir::Builder b(graph);
  b.setInsertionPoint(q);
  Value *bytes = b.create(OpKind::QuantizeLinear, {pool->input(0), q->input(1), q->input(2)}, q->attrs());
  Value *result = b.create(OpKind::MaxPool, {bytes}, pool->attrs());
  for (const Node *reshape : reshapes)
    result = b.create(OpKind::Reshape, {result}, reshape->attrs());
  std::string name = q->output()->name();
  q->output()->replaceAllUsesWith(result);
  graph.eraseNode(q);
  for (auto r = reshapes.rbegin(); r != reshapes.rend(); ++r)
    graph.eraseNode(*r);
  graph.eraseNode(pool);
  result->setName(std::move(name));
  return true;
}

class QuantizedMaxPoolPass final : public Pass {
public:
  std::string_view name() const override { return "quantized-max-pool"; }
  bool run(ir::Graph &graph, PassContext &context) override {
    FiniteBound bounds;
    return rewriteEach(graph, context, OpKind::MaxPool, "max pools on int8",
                       [&](ir::Graph &g, Node *pool) { return rewrite(g, pool, bounds); });
  }
};

} // namespace

std::unique_ptr<Pass> createQuantizedMaxPoolPass() { return std::make_unique<QuantizedMaxPoolPass>(); }

} // namespace kiln::passes
