// Decomposition in rounds. Each round walks a snapshot of the node list and expands every
// composite it holds:
//   1. a Builder positioned just before the composite runs the op's `decompose` on the node's
//      operands and attributes, so the new nodes sit where the composite stood and the node
//      order stays a valid execution order;
//   2. each output's uses move to the matching result (which must have the output's type, and
//      takes over its name when it is a new value), and the composite is erased.
// Decompositions may build composites themselves (linear builds matmul and add, but an
// activation may build another activation); those are expanded by the next round, so the number
// of rounds is the deepest nesting in the op table, and each round is linear in the graph.
#include "passes/decompose/Decompose.h"

#include <unordered_set>

#include "core/Error.h"
#include "ir/Builder.h"

namespace kiln::passes {

namespace {

/// Replaces `node` by its decomposition.
void expand(ir::Graph &graph, ir::Node *node) {
  ir::Node *before = node->prev();
  ir::Builder builder(graph);
  builder.setInsertionPoint(node);
  std::vector<ir::Value *> results;
  try {
    results = ir::opDef(node->op()).decompose(builder, node->inputs(), node->attrs());
  } catch (const Error &error) {
    fail("decomposing {}: {}", node->opName(), error.what());
  }
  if (results.size() != node->numOutputs())
    fail("the decomposition of {} returned {} values for {} outputs", node->opName(), results.size(),
         node->numOutputs());
  // The nodes the decomposition created lie between `before` and `node`.
  std::unordered_set<const ir::Node *> created;
  for (ir::Node *n = before ? before->next() : graph.firstNode(); n != node; n = n->next())
    created.insert(n);
  for (size_t i = 0; i < results.size(); ++i) {
    ir::Value *output = node->output(i), *result = results[i];
    if (result->type() != output->type())
      fail("the decomposition of {} returned {} for output {}, which has type {}", node->opName(),
           result->type().toString(), i, output->type().toString());
    // Only a value this expansion created may take the name: a decomposition that returns one
    // of its operands unchanged must not rename that operand.
    if (result->name().empty() && result->producer() && created.count(result->producer()))
      result->setName(output->name());
    output->replaceAllUsesWith(result);
  }
  graph.eraseNode(node);
}

class Decompose : public Pass {
public:
  explicit Decompose(bool forAutodiff) : forAutodiff_(forAutodiff) {}
  std::string_view name() const override { return "decompose"; }

  bool run(ir::Graph &graph, PassContext &context) override {
    int64_t expanded = 0;
    for (int round = 0;; ++round) {
      std::vector<ir::Node *> composites;
      for (ir::Node *node : graph.nodes())
        if (expands(*node))
          composites.push_back(node);
      if (composites.empty())
        break;
      if (round == kMaxDecompositionDepth)
        fail("{} is still composite after {} rounds of decomposition: its decomposition does not terminate",
             composites.front()->opName(), kMaxDecompositionDepth);
      for (ir::Node *node : composites)
        expand(graph, node);
      expanded += static_cast<int64_t>(composites.size());
    }
    context.stats.add("composites expanded", expanded);
    return expanded > 0;
  }

private:
  bool expands(const ir::Node &node) const {
    if (ir::isComposite(node.op()))
      return true;
    const ir::OpDef &def = ir::opDef(node.op());
    if (!def.decompose)
      return false;
    if (forAutodiff_)
      return true;
    if (!def.expandIf)
      return false;
    std::vector<TensorType> types;
    for (const ir::Value *input : node.inputs())
      types.push_back(input->type());
    return def.expandIf(types, node.attrs());
  }

  bool forAutodiff_;
};

} // namespace

std::unique_ptr<Pass> createDecomposePass() { return std::make_unique<Decompose>(false); }
std::unique_ptr<Pass> createDecomposeForAutodiffPass() { return std::make_unique<Decompose>(true); }

} // namespace kiln::passes
