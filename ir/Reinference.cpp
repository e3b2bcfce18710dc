#include "ir/Reinference.h"

#include "core/Error.h"
#include "ir/Builder.h"

namespace kiln::ir {

void reinferInPlace(Graph &graph, const std::function<void(const Node &, AttrMap &)> &rewrite,
                    const std::function<Shape(const Value &)> &expected, const std::string &at) {
  size_t index = 0;
  for (Node *node : graph.nodes()) {
    std::string where = fmt::format("graph @{}: node {} ({})", graph.name(), index++, node->opName());
    AttrMap attrs = node->attrs();
    rewrite(*node, attrs);
    node->setAttrs(attrs);
    std::vector<TensorType> inputTypes;
    for (const Value *input : node->inputs())
      inputTypes.push_back(input->type());
    std::vector<TensorType> types;
    try {
      types = inferTypes(node->op(), inputTypes, node->attrs());
    } catch (const Error &e) {
      fail("{}: {}: {}", where, at, e.what());
    }
    for (size_t i = 0; i < types.size(); ++i) {
      Value *output = node->output(i);
      Shape want = expected(*output);
      if (types[i].shape != want || types[i].dtype != output->dtype())
        fail("{}: {}, output {} (of type {} before) infers as {} where {} was expected", where, at, i,
             output->type().toString(), types[i].toString(), TensorType{output->dtype(), want}.toString());
      output->setType(types[i]);
    }
  }
}

} // namespace kiln::ir
