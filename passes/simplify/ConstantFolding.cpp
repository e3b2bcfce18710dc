// Constant folding in one forward sweep. A node folds when it is not a source and every operand
// is the output of a `constant` node (vacuously so for iota, which has none). It is evaluated
// with ir::evaluateNode (a composite through its decomposition, a kernel through its body) and
// each output is replaced by a new constant inserted where the node stood, which carries the
// output's name. The folded constants feed the nodes after them, so chains fold in one sweep.
//
// The size rule. Folding replaces a computation by its result's data, which the graph then
// holds (and prints, and codegen embeds). A result of at most kMaxFoldedElements elements
// always folds. A larger one folds only when some operand is at least as large: then the graph
// already holds a tensor of that size, and folding at most replaces it (transposing a constant
// weight, casting it, reshaping it). A large result from small operands - a broadcast scalar,
// an iota, an outer product - stays a computation, which fusion turns into a few instructions
// of a kernel instead of megabytes of data.
//
// A node whose evaluation fails (an index out of range in a constant gather, say) is left as it
// is: the pass must not reject a graph the user may still want printed, and running it reports
// the error at the node.
#include "passes/simplify/ConstantFolding.h"

#include <algorithm>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"

namespace kiln::passes {

namespace {

bool hasOnlyConstantOperands(const ir::Node *node) {
  return std::all_of(node->inputs().begin(), node->inputs().end(), [](const ir::Value *input) {
    return input->producer() && input->producer()->op() == ir::OpKind::Constant;
  });
}

/// The size rule above.
bool smallEnoughToFold(const ir::Node *node) {
  int64_t largestOperand = 0;
  for (const ir::Value *input : node->inputs())
    largestOperand = std::max(largestOperand, input->type().numElements());
  for (size_t i = 0; i < node->numOutputs(); ++i) {
    int64_t elements = node->output(i)->type().numElements();
    if (elements > kMaxFoldedElements && elements > largestOperand)
      return false;
  }
  return true;
}

class ConstantFolding : public Pass {
public:
  std::string_view name() const override { return "constant-fold"; }

  bool run(ir::Graph &graph, PassContext &context) override {
    int64_t folded = 0, tooLarge = 0, failed = 0;
    ir::Builder builder(graph);
    for (ir::Node *node : graph.nodes()) {
      if (ir::opTraits(node->op()).tier == ir::OpTier::Source || !hasOnlyConstantOperands(node))
        continue;
      if (!smallEnoughToFold(node)) {
        ++tooLarge;
        continue;
      }
      std::vector<Tensor> operands;
      for (const ir::Value *input : node->inputs())
        operands.push_back(input->producer()->attrTensor("value"));
      std::vector<Tensor> results;
      try {
        results = ir::evaluateNode(*node, operands);
      } catch (const Error &) {
        ++failed;
        continue;
      }
      builder.setInsertionPoint(node);
      for (size_t i = 0; i < node->numOutputs(); ++i) {
        ir::Value *output = node->output(i);
        ir::Value *constant = builder.constant(results[i]);
        constant->setName(output->name());
        output->replaceAllUsesWith(constant);
      }
      graph.eraseNode(node);
      ++folded;
    }
    context.stats.add("nodes folded", folded);
    context.stats.add("nodes too large to fold", tooLarge);
    context.stats.add("nodes whose evaluation failed", failed);
    return folded > 0;
  }
};

} // namespace

std::unique_ptr<Pass> createConstantFoldingPass() { return std::make_unique<ConstantFolding>(); }

} // namespace kiln::passes
