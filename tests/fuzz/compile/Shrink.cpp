// shrinkCase (declared in Shrink.h). Nodes are matched between a graph and its clone by their
// position in the node list, which Graph::clone keeps.
#include "tests/fuzz/compile/Shrink.h"

#include <algorithm>

#include "core/Error.h"
#include "ir/Verifier.h"
#include "passes/Pass.h"
#include "passes/simplify/DeadCodeElimination.h"
#include "tests/fuzz/compile/InputDomains.h"

namespace kiln::fuzz {

namespace {

/// At most this many candidates per round: one compiler run of a few seconds.
constexpr size_t kMaxCandidates = 48;

/// Removes dead nodes and unused inputs; false when the result is not a valid graph.
bool tidy(ir::Graph &graph) {
  try {
    passes::PassContext context;
    passes::createDeadCodeEliminationPass()->run(graph, context);
    for (ir::Value *input : std::vector<ir::Value *>(graph.inputs()))
      if (!input->hasUses())
        graph.eraseInput(input);
    ir::verify(graph);
    return true;
  } catch (const Error &) {
    return false;
  }
}

/// A name for a new input of `dtype` that no input of `graph` has.
std::string freshInputName(const ir::Graph &graph, DType dtype) {
  InputDomain domain{dtype == DType::Bool ? InputDomain::Kind::Bool : InputDomain::Kind::Signed, {}};
  for (int ordinal = 1000;; ++ordinal) {
    std::string name = inputName(domain, ordinal);
    bool taken = std::any_of(graph.inputs().begin(), graph.inputs().end(),
                             [&](const ir::Value *input) { return input->name() == name; });
    if (!taken)
      return name;
  }
}

std::vector<std::shared_ptr<const ir::Graph>> candidatesOf(const ir::Graph &graph) {
  std::vector<std::shared_ptr<const ir::Graph>> candidates;
  auto size = [](const ir::Graph &g) { return 4 * g.numNodes() + g.inputs().size() + g.outputs().size(); };
  auto keep = [&](std::unique_ptr<ir::Graph> candidate) {
    if (tidy(*candidate) && size(*candidate) < size(graph))
      candidates.push_back(std::move(candidate));
  };
  // Everything dead dropped, and each output alone.
  keep(graph.clone());
  if (graph.outputs().size() > 1)
    for (ir::Value *output : graph.outputs()) {
      std::unique_ptr<ir::Graph> candidate = graph.clone();
      size_t index = static_cast<size_t>(std::find(graph.outputs().begin(), graph.outputs().end(), output) -
                                         graph.outputs().begin());
      candidate->setOutputs({candidate->outputs()[index]});
      keep(std::move(candidate));
    }
  std::vector<ir::Node *> nodes = graph.nodes();
  for (size_t k = nodes.size(); k-- > 0;) {
    const ir::Node *node = nodes[k];
    if (node->op() == ir::OpKind::Param || node->op() == ir::OpKind::Constant)
      continue;
    // Bypass: the node's result replaced by an operand of the same type.
    if (node->numOutputs() == 1)
      for (size_t i = 0; i < node->numInputs(); ++i)
        if (node->input(i)->type() == node->output()->type()) {
          std::unique_ptr<ir::Graph> candidate = graph.clone();
          ir::Node *copy = candidate->nodes()[k];
          copy->output()->replaceAllUsesWith(copy->input(i));
          keep(std::move(candidate));
          break;
        }
    // Cut: the node's results replaced by new inputs (what computed them goes away).
    std::unique_ptr<ir::Graph> candidate = graph.clone();
    ir::Node *copy = candidate->nodes()[k];
    for (ir::Value *output : copy->outputs())
      if (output->hasUses())
        output->replaceAllUsesWith(candidate->addInput(output->type(), freshInputName(*candidate, output->dtype())));
    keep(std::move(candidate));
  }
  if (candidates.size() > kMaxCandidates)
    candidates.resize(kMaxCandidates); // the whole-graph ones come first, then the later nodes
  return candidates;
}

} // namespace

CheckCase shrinkCase(const CheckCase &failing, Outcome outcome, const CheckOptions &options, int maxRounds) {
  CheckCase current = failing;
  for (int round = 0; round < maxRounds; ++round) {
    std::vector<CheckCase> cases;
    for (std::shared_ptr<const ir::Graph> &graph : candidatesOf(*current.graph)) {
      CheckCase candidate = current;
      candidate.graph = std::move(graph);
      cases.push_back(std::move(candidate));
    }
    if (cases.empty())
      break;
    std::vector<CheckResult> results = checkCases(cases, options);
    const CheckCase *best = nullptr;
    for (size_t i = 0; i < cases.size(); ++i)
      if (results[i].outcome == outcome &&
          (!best || cases[i].graph->numNodes() < best->graph->numNodes()))
        best = &cases[i];
    if (!best)
      break;
    current = *best;
  }
  current.label = failing.label + " (shrunk)";
  return current;
}

} // namespace kiln::fuzz
