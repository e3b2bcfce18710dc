// Which outputs overwrite which parameter, and the reads that decide whether writing them in
// place is sound (see ParameterWrites.h).
#include "passes/memory/ParameterWrites.h"

#include <map>
#include <unordered_set>

namespace kiln::passes {

std::vector<ParameterWrite> parameterWrites(const ir::Graph &graph) {
  std::map<std::string, const ir::Node *> params;
  for (const ir::Node *param : graph.params())
    params[param->attrString("name")] = param;
  std::vector<ParameterWrite> writes;
  for (size_t i = 0; i < graph.outputs().size(); ++i)
    if (params.count(graph.outputName(i)))
      writes.push_back({graph.outputName(i), i});
  return writes;
}

ir::Value *findParam(const ir::Graph &graph, const std::string &name) {
  for (ir::Node *param : graph.params())
    if (param->attrString("name") == name)
      return param->output();
  return nullptr;
}

std::vector<ir::Node *> readersOf(const ir::Value *param) {
  std::vector<ir::Node *> readers;
  std::vector<const ir::Value *> work{param};
  std::unordered_set<const ir::Node *> seen;
  while (!work.empty()) {
    const ir::Value *value = work.back();
    work.pop_back();
    for (const ir::Use &use : value->uses()) {
      if (!seen.insert(use.user).second)
        continue;
      readers.push_back(use.user);
      if (use.user->op() == ir::OpKind::Reshape)
        work.push_back(use.user->output());
    }
  }
  return readers;
}

bool isStagedOp(ir::OpKind op) {
  if (op == ir::OpKind::Param || op == ir::OpKind::Constant)
    return false; // sources are Opaque in the table but compute nothing
  ir::FusionKind kind = ir::opTraits(op).fusion;
  return kind == ir::FusionKind::OutFusable || kind == ir::FusionKind::Reduction || kind == ir::FusionKind::Opaque;
}

bool hasStagedOps(const ir::Node &kernel) {
  for (const ir::Node *node : kernel.body()->nodes())
    if (isStagedOp(node->op()))
      return true;
  return false;
}

namespace {

/// Whether every read of kernel body input `input` is elementwise: only elementwise, broadcast
/// and reshape ops reach from it, and each keeps its element count (broadcasting that keeps the
/// count only adds or drops size-1 dims).
bool bodyInputReadsOnlyElementwise(const ir::Value *input) {
  int64_t count = input->type().numElements();
  std::vector<const ir::Value *> work{input};
  std::unordered_set<const ir::Node *> seen;
  while (!work.empty()) {
    const ir::Value *value = work.back();
    work.pop_back();
    for (const ir::Use &use : value->uses()) {
      const ir::Node *user = use.user;
      if (!seen.insert(user).second)
        continue;
      ir::FusionKind kind = ir::opTraits(user->op()).fusion;
      bool pointwise =
          kind == ir::FusionKind::Elementwise || kind == ir::FusionKind::Broadcast || user->op() == ir::OpKind::Reshape;
      if (!pointwise || user->op() == ir::OpKind::Kernel)
        return false;
      for (const ir::Value *output : user->outputs()) {
        if (output->type().numElements() != count)
          return false;
        work.push_back(output);
      }
    }
  }
  return true;
}

} // namespace

bool readsOnlyElementwise(const ir::Node &writer, const ir::Value *param) {
  for (size_t i = 0; i < writer.numInputs(); ++i) {
    if (writer.input(i) != param)
      continue;
    if (writer.op() == ir::OpKind::Kernel) {
      if (!writer.body() || i >= writer.body()->inputs().size() ||
          !bodyInputReadsOnlyElementwise(writer.body()->inputs()[i]))
        return false;
    } else {
      ir::FusionKind kind = ir::opTraits(writer.op()).fusion;
      if ((kind != ir::FusionKind::Elementwise && kind != ir::FusionKind::Broadcast) ||
          writer.output()->type().numElements() != param->type().numElements())
        return false;
    }
  }
  return true;
}

} // namespace kiln::passes
