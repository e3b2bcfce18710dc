// kiln-dump: reads a .kir file or an ONNX model and prints it as text, Graphviz DOT or JSON;
// --coverage reports what kiln supports of an ONNX model before anything runs; --list-ops
// prints the op table with each composite's decomposition into primitives. Every error is one
// line "kiln-dump: MESSAGE" on stderr and exit status 1.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>

#include "frontend/onnx/OnnxImporter.h"
#include "ir/Builder.h"
#include "ir/Error.h"
#include "ir/Evaluator.h"
#include "ir/Export.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

using namespace kiln;
using namespace kiln::ir;

namespace {

constexpr const char *kUsage = R"(usage: kiln-dump FILE [--format=text|dot|json] [--keep-data] [-o OUT]
       kiln-dump MODEL.onnx --coverage [-o OUT]
       kiln-dump --list-ops [-o OUT]

Reads a .kir graph (FILE '-' reads standard input) or an ONNX model (FILE ending in .onnx,
imported with kiln's ONNX importer), verifies it and prints it.
  --format=FORMAT  text (default): the .kir form; dot: Graphviz; json: a JSON document
  --keep-data      print every tensor value (large ones are elided by default)
  --coverage       for an ONNX model: every op type with its node count and whether kiln
                   supports it (and what it does not support); exits 1 when anything is
                   unsupported. Only scans the model: nothing is imported or run
  --list-ops       print every op: mnemonic, tier, fusion kind, family and, for composites,
                   the primitives its decomposition uses
  -o OUT           write to OUT instead of standard output
  --help           show this help
)";

struct Options {
  std::string input;
  std::string output;
  std::string format = "text";
  bool listOps = false;
  bool keepData = false;
  bool coverage = false;
};

bool isOnnxPath(const std::string &path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0;
}

Options parseArgs(int argc, char **argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto valueOf = [&](const std::string &flag) -> std::string {
      if (arg.size() > flag.size() && arg.compare(0, flag.size() + 1, flag + "=") == 0)
        return arg.substr(flag.size() + 1);
      if (i + 1 >= argc)
        fail("{} needs a value", flag);
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (arg == "--list-ops") {
      options.listOps = true;
    } else if (arg == "--keep-data") {
      options.keepData = true;
    } else if (arg == "--coverage") {
      options.coverage = true;
    } else if (arg == "--format" || arg.rfind("--format=", 0) == 0) {
      options.format = valueOf("--format");
      if (options.format != "text" && options.format != "dot" && options.format != "json")
        fail("unknown format '{}' (expected text, dot or json)", options.format);
    } else if (arg == "-o" || arg.rfind("-o=", 0) == 0) {
      options.output = valueOf("-o");
    } else if (arg.size() > 1 && arg[0] == '-') {
      fail("unknown option '{}' (see --help)", arg);
    } else if (!options.input.empty()) {
      fail("more than one input file ('{}' and '{}')", options.input, arg);
    } else {
      options.input = arg;
    }
  }
  if (options.listOps && !options.input.empty())
    fail("--list-ops takes no input file");
  if (!options.listOps && options.input.empty())
    fail("no input file (see --help)");
  if (options.coverage && !isOnnxPath(options.input))
    fail("--coverage needs an ONNX model (a .onnx file), not '{}'", options.input);
  return options;
}

// --- --list-ops ------------------------------------------------------------------------------

/// Small inputs on which each composite's decomposition is built, by mnemonic (an entry for
/// an op not in the table is unused). Attributes an op does not declare are dropped, so the
/// table tolerates schema changes. A composite without an entry is tried on one, two and
/// three f32[2,3] operands with default attributes; if nothing builds, it is listed as
/// "decomposes into: ?".
struct Example {
  std::string op;
  std::vector<TensorType> inputs;
  AttrMap attrs;
};

std::vector<Example> compositeExamples() {
  TensorType f23{DType::F32, {2, 3}}, f3{DType::F32, {3}}, i64x2{DType::I64, {2}};
  TensorType img{DType::F32, {1, 2, 4, 4}}, f2{DType::F32, {2}};
  using Ints = std::vector<int64_t>;
  return {
      {"reduce_mean", {f23}, {{"axes", Ints{1}}}},
      {"squeeze", {{DType::F32, {2, 1, 3}}}, {{"axes", Ints{1}}}},
      {"unsqueeze", {f23}, {{"axes", Ints{1}}}},
      {"flatten", {{DType::F32, {2, 3, 4}}}, {{"start", int64_t{1}}}},
      {"linear", {f23, {DType::F32, {4, 3}}, {DType::F32, {4}}}, {}},
      {"batch_norm", {{DType::F32, {2, 3, 4, 4}}, f3, f3, f3, f3}, {}},
      {"instance_norm", {img, f2, f2}, {}},
      {"layer_norm", {f23, f3, f3}, {}},
      {"lrn", {img}, {{"size", int64_t{3}}}},
      {"mse_loss", {f23, f23}, {}},
      {"cross_entropy", {f23, i64x2}, {}},
      {"nll_loss", {f23, i64x2}, {}},
      {"one_hot", {i64x2, f2}, {{"depth", int64_t{4}}}},
      {"tile", {f23}, {{"repeats", Ints{2, 1}}}},
      {"prelu", {f23, f3}, {}},
      {"einsum", {f23, {DType::F32, {3, 4}}}, {{"equation", std::string("ij,jk->ik")}}},
  };
}

AttrMap declaredOnly(OpKind op, const AttrMap &attrs) {
  AttrMap out;
  for (const AttrSpec &spec : opDef(op).attrs)
    if (auto it = attrs.find(spec.name); it != attrs.end())
      out.insert(*it);
  return out;
}

/// Adds the primitives `op` decomposes into, expanding nested composites.
void collectPrimitives(OpKind op, const std::vector<TensorType> &inputs, const AttrMap &attrs,
                       std::set<std::string> &primitives, int depth) {
  constexpr int kMaxNesting = 16; // a composite that (indirectly) decomposes into itself
  if (depth > kMaxNesting)
    fail("{} decomposes recursively", opName(op));
  if (!opDef(op).decompose)
    fail("{} has no decomposition", opName(op));
  // decompositionGraph trusts its inputs (a decomposition reads its operands unchecked), so
  // an example that does not fit the op must be rejected by inference first.
  inferTypes(op, inputs, completeAttrs(op, attrs));
  auto graph = decompositionGraph(op, inputs, attrs);
  for (const Node *node : graph->nodes()) {
    if (isComposite(node->op())) {
      std::vector<TensorType> types;
      for (const Value *input : node->inputs())
        types.push_back(input->type());
      collectPrimitives(node->op(), types, node->attrs(), primitives, depth + 1);
    } else if (opTraits(node->op()).tier == OpTier::Primitive) {
      primitives.insert(std::string(node->opName()));
    }
  }
}

/// "add, matmul, permute": the primitives `op` decomposes into on its example inputs, or "?".
std::string describeDecomposition(OpKind op, const std::vector<Example> &examples) {
  std::vector<Example> candidates;
  for (const Example &example : examples)
    if (example.op == opName(op))
      candidates.push_back(example);
  if (candidates.empty())
    for (size_t arity = 1; arity <= 3; ++arity)
      candidates.push_back({std::string(opName(op)), std::vector<TensorType>(arity, {DType::F32, {2, 3}}), {}});
  for (const Example &example : candidates) {
    try {
      std::set<std::string> primitives;
      collectPrimitives(op, example.inputs, declaredOnly(op, example.attrs), primitives, 0);
      return fmt::format("{}", fmt::join(primitives, ", "));
    } catch (const std::exception &) {
      // The example does not fit the op (or its family is still being written): try the next.
    }
  }
  return "?";
}

std::string listOps() {
  std::string out;
  std::vector<Example> examples = compositeExamples();
  size_t nameWidth = 0, familyWidth = 0; // columns as wide as their longest entry
  for (int i = 0; i < kNumOps; ++i) {
    nameWidth = std::max(nameWidth, opTraits(static_cast<OpKind>(i)).name.size());
    familyWidth = std::max(familyWidth, opTraits(static_cast<OpKind>(i)).family.size());
  }
  for (int i = 0; i < kNumOps; ++i) {
    auto op = static_cast<OpKind>(i);
    const OpTraits &traits = opTraits(op);
    std::string line = fmt::format("{:<{}} {:<9} {:<11} {:<{}}", traits.name, nameWidth, tierName(traits.tier),
                                   fusionKindName(traits.fusion), traits.family, familyWidth);
    if (traits.tier == OpTier::Composite)
      line += " decomposes into: " + describeDecomposition(op, examples);
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  }
  return out;
}

// --- --coverage ------------------------------------------------------------------------------

/// One line per op type ("Conv  20  supported"), the problems under it, and a summary line.
std::string formatCoverage(const std::string &path, const frontend::OnnxCoverage &coverage) {
  size_t typeWidth = 7;
  for (const frontend::OnnxOpCoverage &op : coverage.ops)
    typeWidth = std::max(typeWidth, op.opType.size());
  std::string out = fmt::format("{}: opset {}, {} nodes, {} op types\n", path, coverage.opset,
                                coverage.nodeCount, coverage.ops.size());
  out += fmt::format("{:<{}} {:>6}  {}\n", "op_type", typeWidth, "count", "status");
  int64_t unsupportedNodes = 0;
  size_t unsupportedTypes = 0;
  for (const frontend::OnnxOpCoverage &op : coverage.ops) {
    std::string status = op.supported ? (op.problems.empty() ? "supported" : "partly supported")
                                      : "unsupported";
    out += fmt::format("{:<{}} {:>6}  {}\n", op.opType, typeWidth, op.count, status);
    for (const std::string &problem : op.problems)
      out += fmt::format("    {}\n", problem);
    if (!op.supported || !op.problems.empty()) {
      ++unsupportedTypes;
      unsupportedNodes += op.count;
    }
  }
  for (const std::string &problem : coverage.otherProblems)
    out += fmt::format("model: {}\n", problem);
  if (coverage.fullySupported())
    out += "every op is supported\n";
  else
    out += fmt::format("{} of {} op types ({} nodes) not fully supported{}\n", unsupportedTypes,
                       coverage.ops.size(), unsupportedNodes,
                       coverage.otherProblems.empty() ? "" : ", and the model problems above");
  return out;
}

// --- main ------------------------------------------------------------------------------------

std::unique_ptr<Graph> readGraph(const std::string &path) {
  if (isOnnxPath(path))
    return frontend::importOnnxFile(path);
  return parseGraphFile(path);
}

std::string render(const Options &options) {
  if (options.listOps)
    return listOps();
  std::unique_ptr<Graph> graph = readGraph(options.input);
  if (options.format == "dot")
    return toDot(*graph);
  if (options.format == "json")
    return toJson(*graph);
  PrintOptions print;
  print.keepLargeTensors = options.keepData;
  return printGraph(*graph, print);
}

void writeOutput(const Options &options, const std::string &text) {
  if (options.output.empty()) {
    std::cout << text << std::flush;
    if (!std::cout)
      fail("cannot write to standard output");
    return;
  }
  std::ofstream out(options.output, std::ios::binary);
  if (!out)
    fail("cannot open '{}' for writing: {}", options.output, std::strerror(errno));
  out << text;
  out.close();
  if (!out)
    fail("cannot write '{}'", options.output);
}

/// Tools report every error as one line.
int reportError(const std::string &message) {
  std::string line = message;
  std::replace(line.begin(), line.end(), '\n', ' ');
  std::cerr << "kiln-dump: " << line << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  try {
    Options options = parseArgs(argc, argv);
    if (options.coverage) {
      frontend::OnnxCoverage coverage = frontend::onnxCoverage(options.input);
      writeOutput(options, formatCoverage(options.input, coverage));
      return coverage.fullySupported() ? 0 : 1;
    }
    writeOutput(options, render(options));
    return 0;
  } catch (const Error &e) {
    return reportError(e.what());
  } catch (const std::exception &e) {
    return reportError(fmt::format("internal error: {}", e.what()));
  } catch (...) {
    return reportError("internal error");
  }
}
