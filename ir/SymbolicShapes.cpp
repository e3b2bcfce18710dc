#include "ir/SymbolicShapes.h"

#include <algorithm>
#include <set>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Reinference.h"
#include "ir/Verifier.h"

namespace kiln::ir {

bool inferenceHandlesSymbols(OpKind op) {
  // Whole families whose rules copy, compare or multiply dims (audited for symbols; the ones
  // that need an extent call requireStaticDim), then single ops of mixed families.
  static const std::set<std::string_view> kFamilies = {"Unary",  "Binary",    "Elementwise",     "Activation",
                                                       "Reduce", "ReduceComposite", "Movement", "NN",
                                                       "Source", "Pooling"};
  static const std::set<OpKind> kOps = {OpKind::Slice,  OpKind::Split, OpKind::Concat,       OpKind::Gather,
                                        OpKind::MatMul, OpKind::Conv,  OpKind::ConvTranspose};
  return kFamilies.count(opTraits(op).family) != 0 || kOps.count(op) != 0;
}

bool attrHoldsDims(OpKind op, const std::string &name) {
  return ((op == OpKind::Reshape || op == OpKind::Broadcast) && name == "shape") ||
         (op == OpKind::Resize && name == "sizes");
}

namespace {

bool valuesStatic(const std::vector<Value *> &values) {
  return std::all_of(values.begin(), values.end(), [](const Value *v) { return v->type().isStatic(); });
}

} // namespace

bool isStaticGraph(const Graph &graph) {
  if (!valuesStatic(graph.inputs()))
    return false;
  for (const Node *node : graph.nodes()) {
    if (!valuesStatic(node->outputs()))
      return false;
    if (node->body() && !isStaticGraph(*node->body()))
      return false;
  }
  return true;
}

std::vector<std::string> graphSymbols(const Graph &graph) {
  std::set<std::string> names;
  for (const Value *input : graph.inputs())
    for (int64_t dim : input->shape())
      for (std::string &name : dimSymbols(dim))
        names.insert(std::move(name));
  return {names.begin(), names.end()};
}

DimBindings bindingsFromShapes(const Graph &graph, const std::map<std::string, Shape> &inputShapes,
                               const DimBindings &given) {
  std::vector<std::optional<Shape>> shapes;
  for (const Value *input : graph.inputs()) {
    auto shape = inputShapes.find(input->name());
    shapes.push_back(shape == inputShapes.end() ? std::nullopt : std::optional<Shape>(shape->second));
  }
  return bindingsFromShapes(graph, shapes, given);
}

DimBindings bindingsFromShapes(const Graph &graph, const std::vector<std::optional<Shape>> &inputShapes,
                               const DimBindings &given) {
  if (inputShapes.size() != graph.inputs().size())
    fail("graph @{} takes {} inputs, got {} shapes", graph.name(), graph.inputs().size(), inputShapes.size());
  std::vector<std::string> names;
  std::vector<TensorType> types;
  for (const Value *input : graph.inputs()) {
    names.push_back(input->name());
    types.push_back(input->type());
  }
  return bindingsFromShapes(names, types, inputShapes, given);
}

DimBindings bindingsFromShapes(const std::vector<std::string> &names, const std::vector<TensorType> &types,
                               const std::vector<std::optional<Shape>> &inputShapes, const DimBindings &given) {
  if (inputShapes.size() != types.size() || names.size() != types.size())
    fail("{} inputs take {} shapes, got {}", names.size(), types.size(), inputShapes.size());
  DimBindings bindings = given;
  std::map<std::string, std::string> source; // symbol -> where its extent came from
  for (const auto &[name, extent] : given)
    source[name] = fmt::format("--dim {}={}", name, extent);
  for (size_t k = 0; k < inputShapes.size(); ++k) {
    const std::string &name = names[k];
    const TensorType &type = types[k];
    const std::optional<Shape> &shape = inputShapes[k];
    if (!shape)
      continue;
    const Shape &declared = type.shape;
    if (shape->size() != declared.size())
      fail("input '{}' is declared {} but given shape {} (rank {}, not {})", name, type.toString(),
           shapeToString(*shape), shape->size(), declared.size());
    for (size_t d = 0; d < declared.size(); ++d) {
      int64_t extent = (*shape)[d];
      std::optional<std::string> symbol = dimSymbolName(declared[d]);
      if (!symbol) {
        if (!isSymbolicDim(declared[d]) && declared[d] != extent)
          fail("input '{}' is declared {} but given shape {}: dim {} must be {}", name, type.toString(),
               shapeToString(*shape), d, declared[d]);
        continue; // an expression dim is checked when the binding evaluates it
      }
      std::string here = fmt::format("input '{}' (dim {} = {})", name, d, extent);
      auto [bound, inserted] = bindings.emplace(*symbol, extent);
      if (!inserted && bound->second != extent)
        fail("symbol {} has two extents: {} from {} but {} from {}", *symbol, bound->second, source[*symbol],
             extent, here);
      source.emplace(*symbol, here);
    }
  }
  return bindings;
}

namespace {

/// Binds `graph` in place: its inputs and every node, in order (types re-inferred). Each
/// output's symbolic type evaluated must be what inference gives at these sizes; else the
/// symbolic rule and the static one disagree, which is a bug in the op's inference.
void bindInPlace(Graph &graph, const DimBindings &bindings) {
  for (Value *input : graph.inputs()) {
    std::string what = fmt::format("input '{}' of type {}", input->name(), input->type().toString());
    input->setType({input->dtype(), evaluateShape(input->shape(), bindings, what)});
  }
  reinferInPlace(
      graph,
      [&](const Node &node, AttrMap &attrs) {
        if (node.body())
          fail("graph @{}: a kernel node in a symbolic graph; bind the symbols before kernels are outlined",
               graph.name());
        for (auto &[name, value] : attrs)
          if (attrHoldsDims(node.op(), name))
            value = evaluateShape(std::get<std::vector<int64_t>>(value), bindings,
                                  fmt::format("graph @{}: {} attribute '{}'", graph.name(), node.opName(), name));
      },
      [&](const Value &output) { return evaluateShape(output.shape(), bindings, "an output"); }, "at this binding");
}

} // namespace

std::unique_ptr<Graph> bindSymbols(const Graph &graph, const DimBindings &bindings) {
  std::vector<std::string> symbols = graphSymbols(graph);
  for (const auto &[name, extent] : bindings)
    if (!std::binary_search(symbols.begin(), symbols.end(), name))
      fail("graph @{}: --dim {}={} names no symbol of its inputs (symbols: {})", graph.name(), name, extent,
           symbols.empty() ? "none" : fmt::format("{}", fmt::join(symbols, ", ")));
  std::unique_ptr<Graph> copy = graph.clone();
  bindInPlace(*copy, bindings);
  verify(*copy);
  return copy;
}

} // namespace kiln::ir
