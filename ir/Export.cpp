// DOT and JSON written directly: both formats are small and fixed, so neither needs a library.
// (DOT went through Boost.Graph's write_graphviz once, over an adjacency_list copy of the graph;
// all that did was number the vertices and write one line per vertex and per edge, as below.)
#include "ir/Export.h"

#include <cmath>
#include <unordered_map>

#include <fmt/format.h>

#include "ir/Printer.h"

namespace kiln::ir {

namespace {

// --- DOT -----------------------------------------------------------------------------------

/// A DOT double-quoted string; '\n' in `text` becomes DOT's centred line break.
std::string dotQuote(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '\n')
      out += "\\n";
    else if (static_cast<unsigned char>(c) >= 0x20)
      out += c;
  }
  return out + "\"";
}

std::string typesOf(const Node &node) {
  std::vector<std::string> types;
  for (size_t i = 0; i < node.numOutputs(); ++i)
    types.push_back(node.output(i)->type().toString());
  return fmt::format("{}", fmt::join(types, ", "));
}

/// A node's vertex label: its op (a param's name, a kernel's rule) and its result types; a
/// kernel also lists its body's ops in order, a few per line so that the box stays narrow.
std::string dotLabel(const Node &node) {
  constexpr size_t kOpsPerLine = 4;
  std::string label(node.opName());
  if (node.op() == OpKind::Param && node.hasAttr("name") && std::holds_alternative<std::string>(node.attrs().at("name")))
    label += " " + quoteString(node.attrString("name"));
  if (node.op() == OpKind::Kernel && node.hasAttr("rule") && std::holds_alternative<std::string>(node.attrs().at("rule")) &&
      !node.attrString("rule").empty())
    label += " " + quoteString(node.attrString("rule"));
  if (const Graph *body = node.body()) {
    std::vector<std::string> ops;
    for (const Node *inner : body->nodes())
      ops.emplace_back(inner->opName());
    for (size_t i = 0; i < ops.size(); i += kOpsPerLine) {
      auto end = ops.begin() + static_cast<std::ptrdiff_t>(std::min(ops.size(), i + kOpsPerLine));
      label += fmt::format("\n{}", fmt::join(ops.begin() + static_cast<std::ptrdiff_t>(i), end, ", "));
    }
  }
  return label + "\n" + typesOf(node);
}

/// The fill colour of each fusion rule (the names of passes/fusion/FusionAnalysis.h, which ir cannot
/// include): light ColorBrewer "Paired" tones, distinct from each other and dark enough to see
/// on white yet light enough for black text. Single ops stay unfilled.
struct RuleColour {
  const char *rule;
  const char *legendId; // the rule as a DOT identifier
  const char *fill;
};
constexpr RuleColour kRuleColours[] = {
    {"elementwise", "legend_elementwise", "#a6cee3"},          // light blue
    {"contraction+epilogue", "legend_contraction", "#fdbf6f"}, // light orange
    {"reduction", "legend_reduction", "#b2df8a"},              // light green
    {"movement", "legend_movement", "#cab2d6"},                // light purple
};
/// A kernel whose rule is missing or not one of the above (a hand-written .kir).
constexpr const char *kOtherKernelFill = "#d9d9d9";

std::string kernelFill(const Node &node) {
  if (node.hasAttr("rule") && std::holds_alternative<std::string>(node.attrs().at("rule")))
    for (const RuleColour &colour : kRuleColours)
      if (node.attrString("rule") == colour.rule)
        return colour.fill;
  return kOtherKernelFill;
}

/// The legend: one sample vertex per rule, stacked by invisible edges in a cluster of its own,
/// and the grey "other kernel" sample only when such a kernel is drawn.
std::string dotLegend(bool hasOtherKernel) {
  std::string out = "subgraph cluster_legend {\nlabel=\"kernel rules\";\nstyle=rounded;\n";
  std::vector<std::string> ids;
  auto sample = [&](const std::string &id, const std::string &label, const char *shape, const char *fill) {
    out += fmt::format("{} [label={}, shape={}", id, dotQuote(label), shape);
    out += fill ? fmt::format(", style=filled, fillcolor=\"{}\"];\n", fill) : std::string("];\n");
    ids.push_back(id);
  };
  for (const RuleColour &colour : kRuleColours)
    sample(colour.legendId, colour.rule, "box3d", colour.fill);
  if (hasOtherKernel)
    sample("legend_other", "other kernel", "box3d", kOtherKernelFill);
  sample("legend_single", "single op", "box", nullptr);
  out += fmt::format("{} [style=invis];\n}}\n", fmt::join(ids, " -> "));
  return out;
}

// --- JSON ----------------------------------------------------------------------------------

/// Length of the valid UTF-8 sequence starting at text[i], or 0 if there is none.
size_t utf8SequenceLength(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char lead = byte(i);
  size_t length = lead >= 0xf0 && lead <= 0xf4 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc2 && lead < 0xe0 ? 2 : 0;
  if (length == 0 || i + length > text.size())
    return 0;
  for (size_t k = 1; k < length; ++k)
    if ((byte(i + k) & 0xc0) != 0x80)
      return 0;
  return length;
}

/// A JSON string. Names in kiln may hold any bytes; bytes that are not valid UTF-8 become
/// U+FFFD so that the document stays valid JSON.
std::string jsonString(std::string_view text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size();) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += text[i++];
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\u{:04x}", c);
      ++i;
    } else if (c < 0x80) {
      out += text[i++];
    } else if (size_t length = utf8SequenceLength(text, i)) {
      out += text.substr(i, length);
      i += length;
    } else {
      out += "\\ufffd";
      ++i;
    }
  }
  return out + "\"";
}

std::string jsonReal(double value, bool asFloat) {
  if (!std::isfinite(value))
    return jsonString(fmt::format("{}", value)); // "inf", "-inf", "nan"
  return asFloat ? formatFloat(static_cast<float>(value)) : formatDouble(value);
}

constexpr int64_t kJsonTensorValues = 8;

std::string jsonTensor(const Tensor &tensor) {
  if (!tensor.defined())
    return "null";
  std::vector<std::string> values;
  int64_t shown = std::min(tensor.numElements(), kJsonTensorValues);
  for (int64_t i = 0; i < shown; ++i) {
    if (isFloat(tensor.dtype()))
      values.push_back(jsonReal(tensor.getDouble(i), tensor.dtype() != DType::F64));
    else if (tensor.dtype() == DType::Bool)
      values.push_back(tensor.getInt(i) ? "true" : "false");
    else
      values.push_back(fmt::format("{}", tensor.getInt(i)));
  }
  return fmt::format("{{\"type\": {}, \"values\": [{}], \"truncated\": {}}}", jsonString(tensor.type().toString()),
                     fmt::join(values, ", "), shown < tensor.numElements() ? "true" : "false");
}

std::string jsonAttribute(const Attribute &attr) {
  switch (attrKind(attr)) {
  case AttrKind::Int: return fmt::format("{}", std::get<int64_t>(attr));
  case AttrKind::Float: return jsonReal(std::get<double>(attr), false);
  case AttrKind::Ints: return fmt::format("[{}]", fmt::join(std::get<std::vector<int64_t>>(attr), ", "));
  case AttrKind::Floats: {
    std::vector<std::string> items;
    for (double v : std::get<std::vector<double>>(attr))
      items.push_back(jsonReal(v, false));
    return fmt::format("[{}]", fmt::join(items, ", "));
  }
  case AttrKind::String: return jsonString(std::get<std::string>(attr));
  case AttrKind::DType: return jsonString(dtypeName(std::get<DType>(attr)));
  case AttrKind::Tensor: return jsonTensor(std::get<Tensor>(attr));
  }
  return "null";
}

/// The "inputs", "nodes", "outputs" and "outputNames" members of a graph object, one per line
/// at `indent`, their items one per line one level deeper. A kernel node's object also has a
/// "body" with the same members, in the body's own value names (bodies nest one level in a
/// verified graph).
std::string jsonGraphFields(const Graph &graph, const std::string &indent) {
  auto names = printedValueNames(graph);
  auto ref = [&](const Value *value) {
    auto it = names.find(value);
    return jsonString(it == names.end() ? std::string("%?") : "%" + it->second);
  };
  std::string itemIndent = indent + "  ";
  std::string firstSeparator = "\n" + itemIndent, separator = ",\n" + itemIndent;
  std::string out = indent + "\"inputs\": [";
  const std::string *next = &firstSeparator;
  for (const Value *input : graph.inputs()) {
    out += fmt::format("{}{{\"name\": {}, \"type\": {}}}", *next, ref(input), jsonString(input->type().toString()));
    next = &separator;
  }
  out += graph.inputs().empty() ? "],\n" : fmt::format("\n{}],\n", indent);
  out += indent + "\"nodes\": [";
  next = &firstSeparator;
  for (const Node *node : graph.nodes()) {
    std::vector<std::string> inputs, outputs, types, attrs;
    for (const Value *input : node->inputs())
      inputs.push_back(ref(input));
    for (size_t i = 0; i < node->numOutputs(); ++i) {
      outputs.push_back(ref(node->output(i)));
      types.push_back(jsonString(node->output(i)->type().toString()));
    }
    for (const auto &[name, value] : node->attrs())
      attrs.push_back(fmt::format("{}: {}", jsonString(name), jsonAttribute(value)));
    out += fmt::format("{}{{\"op\": {}, \"inputs\": [{}], \"outputs\": [{}], \"types\": [{}], \"attrs\": {{{}}}", *next,
                       jsonString(node->opName()), fmt::join(inputs, ", "), fmt::join(outputs, ", "),
                       fmt::join(types, ", "), fmt::join(attrs, ", "));
    if (const Graph *body = node->body())
      out += fmt::format(", \"body\": {{\n{}{}}}", jsonGraphFields(*body, itemIndent + "  "), itemIndent);
    out += "}";
    next = &separator;
  }
  out += graph.numNodes() == 0 ? "],\n" : fmt::format("\n{}],\n", indent);
  // "outputNames": the name each output goes by (Graph::outputName, as kiln-run and a compiled
  // model's signature list it), which differs from its value's where a model declares its own.
  std::vector<std::string> outputs, outputNames;
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    outputs.push_back(ref(graph.outputs()[i]));
    const std::string &name = graph.outputName(i);
    auto it = names.find(graph.outputs()[i]);
    outputNames.push_back(jsonString(!name.empty() || it == names.end() ? name : it->second));
  }
  out += fmt::format("{}\"outputs\": [{}],\n", indent, fmt::join(outputs, ", "));
  out += fmt::format("{}\"outputNames\": [{}]\n", indent, fmt::join(outputNames, ", "));
  return out;
}

} // namespace

std::string toDot(const Graph &graph) {
  auto names = printedValueNames(graph);
  auto ref = [&](const Value *value) {
    auto it = names.find(value);
    return it == names.end() ? std::string("%?") : "%" + it->second;
  };
  // Vertices are numbered in the order they are written; the edges follow them all, in the
  // order of the operands they stand for.
  std::string vertices, edges;
  int64_t numVertices = 0;
  auto addVertex = [&](const std::string &label, const char *shape, const std::string &fill = {}) {
    vertices += fmt::format("{}[label={}, shape={}", numVertices, dotQuote(label), shape);
    if (!fill.empty())
      vertices += fmt::format(", style=filled, fillcolor=\"{}\"", fill);
    vertices += "];\n";
    return numVertices++;
  };
  std::unordered_map<const Value *, int64_t> producerVertex;
  for (const Value *input : graph.inputs())
    producerVertex[input] = addVertex(ref(input) + "\n" + input->type().toString(), "ellipse");
  auto addEdge = [&](const Value *value, int64_t to) {
    auto from = producerVertex.find(value);
    if (from != producerVertex.end())
      edges += fmt::format("{}->{} [label={}];\n", from->second, to, dotQuote(ref(value)));
  };
  bool hasKernel = false, hasOtherKernel = false;
  for (const Node *node : graph.nodes()) {
    std::string fill;
    if (node->body()) {
      fill = kernelFill(*node);
      hasKernel = true;
      hasOtherKernel = hasOtherKernel || fill == kOtherKernelFill;
    }
    int64_t vertex = addVertex(dotLabel(*node), node->body() ? "box3d" : "box", fill);
    for (const Value *input : node->inputs())
      addEdge(input, vertex);
    for (size_t i = 0; i < node->numOutputs(); ++i)
      producerVertex[node->output(i)] = vertex;
  }
  int64_t ret = addVertex("return", "doublecircle");
  for (const Value *output : graph.outputs())
    addEdge(output, ret);

  std::string out = "digraph G {\n";
  out += "label=" + dotQuote("@" + graph.name()) + ";\n";
  out += "node [fontname=\"monospace\"];\n";
  out += "edge [fontname=\"monospace\"];\n";
  if (hasKernel)
    out += dotLegend(hasOtherKernel);
  return out + vertices + edges + "}\n";
}

std::string toJson(const Graph &graph) {
  return fmt::format("{{\n  \"name\": {},\n{}}}\n", jsonString(graph.name()), jsonGraphFields(graph, "  "));
}

} // namespace kiln::ir
