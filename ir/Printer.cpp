// The .kir printer. Output is deterministic: nodes in list order, names from
// printedValueNames (per graph: a kernel body has its own names), attributes in map (name)
// order, numbers in shortest round-trip form.
#include "ir/Printer.h"

#include <algorithm>
#include <unordered_set>

#include "core/Error.h"
#include "core/SymbolicDim.h"
#include "ir/Lexer.h"

namespace kiln::ir {

namespace {

bool isAllDigits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string sanitizeName(const std::string &name) {
  std::string out = name;
  for (char &c : out)
    if (!isNameChar(c))
      c = '_';
  // A name of digits only would read back as a number, which the parser does not store.
  if (isAllDigits(out))
    out = "v" + out;
  return out;
}

/// fmt's shortest form omits the point for integral values ("1"); the text form always marks
/// a float so that the reader can tell it from an integer.
std::string markAsFloat(std::string text) {
  if (text.find_first_of(".eEn") == std::string::npos) // 'n': inf and nan
    text += ".0";
  return text;
}

std::string formatElement(const Tensor &tensor, int64_t i) {
  switch (tensor.dtype()) {
  case DType::F32: return formatFloat(tensor.dataAs<float>()[i]);
  case DType::F64: return formatDouble(tensor.dataAs<double>()[i]);
  case DType::F16: return formatFloat(halfToFloat(tensor.dataAs<uint16_t>()[i]));
  case DType::BF16: return formatFloat(bfloat16ToFloat(tensor.dataAs<uint16_t>()[i]));
  case DType::I64:
  case DType::I32:
  case DType::I8:
  case DType::U8: return fmt::format("{}", tensor.getInt(i));
  case DType::Bool: return tensor.getInt(i) ? "true" : "false";
  }
  return "?";
}

std::string formatGraphName(const std::string &name) {
  bool plain = !name.empty() && std::all_of(name.begin(), name.end(), isNameChar);
  return "@" + (plain ? name : quoteString(name));
}

using ValueNames = std::unordered_map<const Value *, std::string>;

class GraphPrinter {
public:
  GraphPrinter(const Graph &graph, const PrintOptions &options) : graph_(graph), options_(options) {}

  std::string print() {
    ValueNames names = printedValueNames(graph_);
    std::vector<std::string> inputs, outputTypes;
    for (const Value *input : graph_.inputs())
      inputs.push_back(fmt::format("{}: {}", ref(input, names), input->type().toString()));
    for (const Value *output : graph_.outputs())
      outputTypes.push_back(output->type().toString());
    out_ = fmt::format("graph {}({}) -> ({}) {{\n", formatGraphName(graph_.name()), fmt::join(inputs, ", "),
                       fmt::join(outputTypes, ", "));
    printBlock(graph_, names, "  ");
    out_ += "}\n";
    return std::move(out_);
  }

private:
  static std::string ref(const Value *value, const ValueNames &names) {
    auto it = names.find(value);
    return it == names.end() ? "%?" : "%" + it->second; // "%?": a value from outside the graph
  }

  /// The statements and the return of a graph or a kernel body.
  void printBlock(const Graph &graph, const ValueNames &names, const std::string &indent) {
    for (const Node *node : graph.nodes())
      printNode(*node, names, indent);
    std::vector<std::string> returned;
    for (size_t i = 0; i < graph.outputs().size(); ++i) {
      // An output whose name is not its value's printed one says it, so that it reads back.
      std::string value = ref(graph.outputs()[i], names);
      const std::string &name = graph.outputName(i);
      returned.push_back(name.empty() || "%" + name == value ? value : value + " as " + quoteString(name));
    }
    out_ += returned.empty() ? indent + "return\n" : fmt::format("{}return {}\n", indent, fmt::join(returned, ", "));
  }

  void printNode(const Node &node, const ValueNames &names, const std::string &indent) {
    std::vector<std::string> results, types;
    for (size_t i = 0; i < node.numOutputs(); ++i) {
      results.push_back(ref(node.output(i), names));
      types.push_back(node.output(i)->type().toString());
    }
    out_ += fmt::format("{}{} = ", indent, fmt::join(results, ", "));
    const AttrMap &attrs = node.attrs();
    auto name = attrs.find("name");
    auto value = attrs.find("value");
    bool hasValue = value != attrs.end() && std::holds_alternative<Tensor>(value->second);
    if (node.op() == OpKind::Param && name != attrs.end() && std::holds_alternative<std::string>(name->second)) {
      // dtype and shape are the printed type; only the initial value needs an attribute.
      out_ += fmt::format("param {}", quoteString(std::get<std::string>(name->second)));
      if (hasValue && std::get<Tensor>(value->second).defined())
        out_ += fmt::format(" {{value = {}}}", formatTensor(std::get<Tensor>(value->second), options_));
    } else if (node.op() == OpKind::Constant && hasValue && attrs.size() == 1) {
      out_ += fmt::format("constant {}", formatTensor(std::get<Tensor>(value->second), options_));
    } else {
      std::vector<std::string> operands;
      for (const Value *input : node.inputs())
        operands.push_back(ref(input, names));
      out_ += fmt::format("{}({}){}", node.opName(), fmt::join(operands, ", "), formatAttrs(node));
    }
    out_ += fmt::format(" : {}", fmt::join(types, ", "));
    if (!node.body()) {
      out_ += "\n";
      return;
    }
    // Printed for any node that has a body, so that a broken graph still shows what it holds
    // (the parser accepts a body only on a kernel). Bodies of a verified graph do not nest.
    out_ += " {\n";
    printBody(*node.body(), indent + "  ");
    out_ += indent + "}\n";
  }

  /// `^(%a: T, ...):` and the body's statements, with names of the body's own scope.
  void printBody(const Graph &body, const std::string &indent) {
    ValueNames names = printedValueNames(body);
    std::vector<std::string> inputs;
    for (const Value *input : body.inputs())
      inputs.push_back(fmt::format("{}: {}", ref(input, names), input->type().toString()));
    out_ += fmt::format("{}^({}):\n", indent, fmt::join(inputs, ", "));
    printBlock(body, names, indent);
  }

  /// " {a = 1, b = [2]}" for the attributes that differ from the op's defaults, or "".
  std::string formatAttrs(const Node &node) const {
    const std::vector<AttrSpec> &specs = opDef(node.op()).attrs;
    std::vector<std::string> parts;
    for (const auto &attr : node.attrs()) { // no structured binding: clang 14 cannot capture one
      const std::string &name = attr.first;
      auto spec = std::find_if(specs.begin(), specs.end(), [&](const AttrSpec &s) { return s.name == name; });
      if (spec != specs.end() && spec->defaultValue && attributesEqual(*spec->defaultValue, attr.second))
        continue;
      parts.push_back(fmt::format("{} = {}", name, formatAttribute(attr.second, options_)));
    }
    return parts.empty() ? "" : fmt::format(" {{{}}}", fmt::join(parts, ", "));
  }

  const Graph &graph_;
  const PrintOptions &options_;
  std::string out_;
};

} // namespace

std::unordered_map<const Value *, std::string> printedValueNames(const Graph &graph) {
  std::unordered_map<const Value *, std::string> names;
  std::unordered_set<std::string> used;
  // The next suffix to try per base name, so that many values sharing one name stay linear.
  std::unordered_map<std::string, int64_t> nextSuffix;
  auto claim = [&](const Value *value, const std::string &base) {
    std::string name = base;
    if (used.count(name)) {
      int64_t &suffix = nextSuffix[base];
      do
        name = fmt::format("{}_{}", base, ++suffix);
      while (used.count(name));
    }
    used.insert(name);
    names[value] = name;
  };
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Value *input = graph.inputs()[i];
    claim(input, input->name().empty() ? fmt::format("arg{}", i) : sanitizeName(input->name()));
  }
  // Numbers never collide with names: a sanitised name is never all digits.
  int64_t number = 0;
  for (const Node *node : graph.nodes()) {
    for (size_t i = 0; i < node->numOutputs(); ++i) {
      const Value *value = node->output(i);
      if (value->name().empty())
        names[value] = fmt::format("{}", number++);
      else
        claim(value, sanitizeName(value->name()));
    }
  }
  return names;
}

std::string formatDouble(double value) { return markAsFloat(fmt::format("{}", value)); }

std::string formatFloat(float value) { return markAsFloat(fmt::format("{}", value)); }

std::string quoteString(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\t': out += "\\t"; break;
    case '\r': out += "\\r"; break;
    default:
      if (byte < 0x20 || byte == 0x7f)
        out += fmt::format("\\x{:02x}", byte);
      else
        out += c; // bytes >= 0x80 (UTF-8) stay as they are
    }
  }
  return out + "\"";
}

std::string formatTensor(const Tensor &tensor, const PrintOptions &options) {
  if (!tensor.defined())
    return "tensor<undefined>"; // only in a graph that does not verify; it does not parse
  std::string out = fmt::format("tensor<{}>", tensor.type().toString());
  int64_t n = tensor.numElements();
  if (n > options.maxInlineElements && !options.keepLargeTensors)
    return out + " elided";
  out += '[';
  for (int64_t i = 0; i < n; ++i) {
    if (i)
      out += ", ";
    out += formatElement(tensor, i);
  }
  return out + ']';
}

std::string formatAttribute(const Attribute &attr, const PrintOptions &options) {
  switch (attrKind(attr)) {
  case AttrKind::Int: return fmt::format("{}", std::get<int64_t>(attr));
  case AttrKind::Float: return formatDouble(std::get<double>(attr));
  case AttrKind::Ints: { // symbolic dims in a shape attribute print as their expressions
    std::vector<std::string> items;
    for (int64_t value : std::get<std::vector<int64_t>>(attr))
      items.push_back(dimToString(value));
    return fmt::format("[{}]", fmt::join(items, ", "));
  }
  case AttrKind::Floats: {
    std::vector<std::string> items;
    for (double v : std::get<std::vector<double>>(attr))
      items.push_back(formatDouble(v));
    return fmt::format("[{}]", fmt::join(items, ", "));
  }
  case AttrKind::String: return quoteString(std::get<std::string>(attr));
  case AttrKind::DType: return std::string(dtypeName(std::get<DType>(attr)));
  case AttrKind::Tensor: return formatTensor(std::get<Tensor>(attr), options);
  }
  return "?";
}

std::string printGraph(const Graph &graph, const PrintOptions &options) {
  return GraphPrinter(graph, options).print();
}

} // namespace kiln::ir
