// order-parameter-writes (see OrderParameterWrites.h): per parameter write, in output order,
// find the last other reader of the parameter; if the writer comes before it, move the writer
// and the nodes between that depend on it to just after that reader, in their order. Nothing
// else moves, so every operand stays defined before its use. Positions are recomputed per write:
// earlier moves change them.
#include "passes/memory/OrderParameterWrites.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "core/Error.h"
#include "passes/memory/ParameterWrites.h"

namespace kiln::passes {

namespace {

/// Moves the writer of `write` past the last other reader of its parameter; returns the
/// number of nodes moved.
int64_t order(ir::Graph &graph, const ParameterWrite &write) {
  ir::Value *param = findParam(graph, write.param);
  ir::Node *writer = graph.outputs()[write.output]->producer();
  if (!param || !writer || writer->op() == ir::OpKind::Param || writer->op() == ir::OpKind::Constant)
    return 0; // nothing reads it, or an output copy (those launch after every node) writes it
  std::vector<ir::Node *> nodes = graph.nodes();
  std::unordered_map<const ir::Node *, size_t> position; // lookup only
  for (size_t i = 0; i < nodes.size(); ++i)
    position[nodes[i]] = i;
  std::vector<ir::Node *> readers = readersOf(param);
  size_t lastReader = position.at(writer);
  for (ir::Node *reader : readers)
    if (reader != writer)
      lastReader = std::max(lastReader, position.at(reader));
  if (lastReader == position.at(writer))
    return 0;
  std::unordered_set<const ir::Node *> moving{writer};
  std::vector<ir::Node *> moved{writer};
  for (size_t i = position.at(writer) + 1; i <= lastReader; ++i) {
    bool depends = false;
    for (const ir::Value *input : nodes[i]->inputs())
      depends = depends || (input->producer() && moving.count(input->producer()));
    if (!depends)
      continue;
    if (std::find(readers.begin(), readers.end(), nodes[i]) != readers.end())
      fail("the update of parameter '{}' cannot be done in place: a reader of the parameter depends on its new "
           "value",
           write.param);
    moving.insert(nodes[i]);
    moved.push_back(nodes[i]);
  }
  ir::Node *anchor = nodes[lastReader]->next();
  for (ir::Node *node : moved)
    graph.moveBefore(node, anchor);
  return static_cast<int64_t>(moved.size());
}

class OrderParameterWrites final : public Pass {
public:
  std::string_view name() const override { return "order-parameter-writes"; }

  bool run(ir::Graph &graph, PassContext &context) override {
    int64_t moved = 0;
    for (const ParameterWrite &write : parameterWrites(graph))
      moved += order(graph, write);
    context.stats.add("nodes moved", moved);
    return moved > 0;
  }
};

} // namespace

std::unique_ptr<Pass> createOrderParameterWritesPass() { return std::make_unique<OrderParameterWrites>(); }

} // namespace kiln::passes
