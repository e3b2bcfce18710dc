// Compile, run, compare (declared in DifferentialCheck.h).
//
// Stages of checkCases:
//  1. the reference: ir::evaluate on the case's inputs (an error here is the generator's);
//  2. lowering: codegen::lowerGraph per case with its own symbol prefix (an error saying an op
//     "is not supported" is codegen's documented refusal, anything else a compile error);
//  3. one compiler run for every lowered case (the costly part, ~0.3-1 s per run); when it
//     fails, one run per case, so that only the cases that break the compiler are blamed;
//  4. each model loaded from its object, run and compared with the reference.
#include "tests/fuzz/compile/DifferentialCheck.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>

#include "codegen/CompileModel.h"
#include "core/Error.h"
#include "core/SymbolicDim.h"
#include "ir/BatchTiling.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "passes/Pass.h"
#include "passes/autodiff/Autodiff.h"
#include "passes/decompose/Decompose.h"
#include "tests/fuzz/compile/InputDomains.h"

namespace kiln::fuzz {

namespace {

bool saysUnsupported(const std::string &message) { return message.find("is not supported") != std::string::npos; }

/// The first element where two integer or bool tensors differ, as "[i]: got X, expected Y".
std::string firstDifference(const Tensor &got, const Tensor &want) {
  for (int64_t i = 0; i < got.numElements(); ++i)
    if (got.getInt(i) != want.getInt(i))
      return fmt::format("element {}: got {}, expected {}", i, got.getInt(i), want.getInt(i));
  return "the bytes differ";
}

std::string oneLine(std::string text) {
  for (char &c : text)
    if (c == '\n' || c == '\r')
      c = ' ';
  return text;
}

} // namespace

std::string_view outcomeName(Outcome outcome) {
  switch (outcome) {
  case Outcome::Match: return "match";
  case Outcome::Mismatch: return "mismatch";
  case Outcome::CompileError: return "compile-error";
  case Outcome::RunError: return "run-error";
  case Outcome::Unsupported: return "unsupported";
  case Outcome::ReferenceError: return "reference-error";
  }
  return "?";
}

bool isFailure(Outcome outcome) {
  return outcome == Outcome::Mismatch || outcome == Outcome::CompileError || outcome == Outcome::RunError;
}

double relativeTolerance(DType dtype) {
  switch (dtype) {
  // Generated code computes f32 in f32 (the reference in double, rounding once per op) and
  // reorders sums; 1e-4 of the output's scale leaves room for chains of a few dozen ops.
  case DType::F32: return 1e-4;
  // Both compute in double; only the order of sums differs.
  case DType::F64: return 1e-9;
  // Both round every op's result to the 16-bit dtype; a last-bit difference in an f32 step
  // before a rounding can move it by one unit (2^-11, 2^-8), which later ops may double.
  case DType::F16: return 4e-3;
  case DType::BF16: return 3e-2;
  default: return 0;
  }
}

double graphTolerance(const ir::Graph &graph) {
  double tolerance = 0;
  for (const ir::Value *input : graph.inputs())
    tolerance = std::max(tolerance, relativeTolerance(input->dtype()));
  for (const ir::Node *node : graph.nodes())
    for (const ir::Value *output : node->outputs())
      tolerance = std::max(tolerance, relativeTolerance(output->dtype()));
  return tolerance;
}

std::string compareOutputs(const std::vector<Tensor> &got, const std::vector<Tensor> &want, double floorTolerance) {
  if (got.size() != want.size())
    return fmt::format("{} outputs, the reference has {}", got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].type() != want[i].type())
      return fmt::format("output {}: type {}, the reference has {}", i, got[i].type().toString(),
                         want[i].type().toString());
    if (!isFloat(want[i].dtype())) {
      if (!got[i].identical(want[i]))
        return fmt::format("output {} ({}): {}", i, want[i].type().toString(), firstDifference(got[i], want[i]));
      continue;
    }
    double scale = 1;
    for (int64_t j = 0; j < want[i].numElements(); ++j)
      if (std::isfinite(want[i].getDouble(j)))
        scale = std::max(scale, std::fabs(want[i].getDouble(j)));
    double rtol = std::max(relativeTolerance(want[i].dtype()), floorTolerance);
    Comparison comparison = compareTensors(got[i], want[i], 0, rtol * scale);
    if (!comparison.ok)
      return fmt::format("output {} ({}, scale {}): {}", i, want[i].type().toString(), scale, comparison.message);
  }
  return "";
}

std::vector<CheckResult> checkCases(const std::vector<CheckCase> &cases, const CheckOptions &options) {
  std::vector<CheckResult> results(cases.size());
  std::vector<std::vector<Tensor>> inputs(cases.size()), references(cases.size());
  std::vector<std::unique_ptr<codegen::LoweredModel>> lowered(cases.size());
  std::vector<size_t> compiling;
  for (size_t i = 0; i < cases.size(); ++i) {
    const ir::Graph &graph = *cases[i].graph;
    try {
      inputs[i] = makeInputs(graph, cases[i].inputSeed);
      references[i] = ir::evaluate(graph, inputs[i]);
    } catch (const std::exception &e) {
      results[i] = {Outcome::ReferenceError, oneLine(e.what())};
      continue;
    }
    codegen::CompileOptions compileOptions;
    compileOptions.fuse = cases[i].fuse;
    if (cases[i].batchTile > 0)
      compileOptions.batchTile = cases[i].batchTile;
    compileOptions.symbolPrefix = fmt::format("m{}_", i);
    try {
      lowered[i] = std::make_unique<codegen::LoweredModel>(codegen::lowerGraph(graph, compileOptions));
      compiling.push_back(i);
    } catch (const Error &e) {
      results[i] = {saysUnsupported(e.what()) ? Outcome::Unsupported : Outcome::CompileError, oneLine(e.what())};
    } catch (const std::exception &e) {
      results[i] = {Outcome::CompileError, oneLine(fmt::format("lowering threw {}", e.what()))};
    }
  }
  if (compiling.empty())
    return results;

  // One translation unit for all; on failure one per case, to blame only the broken ones.
  std::vector<std::string> objectOf(cases.size());
  try {
    std::vector<const codegen::LoweredModel *> models;
    for (size_t i : compiling)
      models.push_back(lowered[i].get());
    std::string so = codegen::compileLoweredBatch(models, options.compiler).soPath;
    for (size_t i : compiling)
      objectOf[i] = so;
  } catch (const std::exception &) {
    for (size_t i : compiling) {
      try {
        objectOf[i] = codegen::compileLoweredBatch({lowered[i].get()}, options.compiler).soPath;
      } catch (const std::exception &e) {
        results[i] = {Outcome::CompileError, oneLine(e.what())};
      }
    }
  }

  for (size_t i : compiling) {
    if (objectOf[i].empty())
      continue;
    std::vector<Tensor> got;
    try {
      runtime::Executable executable = runtime::Executable::load(
          objectOf[i], codegen::collectWeights(*lowered[i], {}), {}, lowered[i]->model.modelSymbol);
      got = executable.run(inputs[i]);
    } catch (const std::exception &e) {
      results[i] = {Outcome::RunError, oneLine(e.what())};
      continue;
    }
    std::string difference = compareOutputs(got, references[i], graphTolerance(*cases[i].graph));
    if (!difference.empty())
      results[i] = {Outcome::Mismatch, difference};
  }
  return results;
}

std::unique_ptr<ir::Graph> gradientGraph(const ir::Graph &forward, uint64_t seed, std::string &whyNot) {
  std::unique_ptr<ir::Graph> graph = forward.clone();
  graph->setName(forward.name() + "_grad");
  passes::PassContext context;
  passes::createDecomposeForAutodiffPass()->run(*graph, context); // as the training graph does
  auto differentiable = [](const ir::Value *value) { return isFloat(value->dtype()); };
  ir::Builder b(*graph);
  ir::Value *loss = nullptr;
  for (size_t i = 0; i < graph->outputs().size(); ++i) {
    ir::Value *output = graph->outputs()[i];
    if (!differentiable(output))
      continue;
    if (output->dtype() == DType::F16 || output->dtype() == DType::BF16) // the loss sums in f32
      output = b.create(ir::OpKind::Cast, {output}, {{"to", DType::F32}});
    Tensor weights = makeInput(output->type(), InputDomain{InputDomain::Kind::Signed, {}}, mixSeed(seed + i));
    ir::Value *weighted = b.create(ir::OpKind::Mul, {output, b.constant(weights)});
    ir::Value *term = b.create(ir::OpKind::ReduceSum, {weighted});
    if (loss && term->dtype() != loss->dtype())
      term = b.create(ir::OpKind::Cast, {term}, {{"to", loss->dtype()}});
    loss = loss ? b.create(ir::OpKind::Add, {loss, term}) : term;
  }
  if (!loss) {
    whyNot = "no float output";
    return nullptr;
  }
  std::vector<ir::Value *> wrt;
  for (ir::Value *input : graph->inputs())
    if (differentiable(input) && parseInputName(input->name()).kind != InputDomain::Kind::Wild)
      wrt.push_back(input);
  for (ir::Node *param : graph->params())
    if (differentiable(param->output()))
      wrt.push_back(param->output());
  if (wrt.empty()) {
    whyNot = "no float input or parameter";
    return nullptr;
  }
  try {
    graph->setOutputs(passes::autodiff::appendGradients(*graph, loss, wrt));
  } catch (const Error &e) {
    whyNot = oneLine(e.what());
    return nullptr;
  }
  return graph;
}

std::optional<CheckCase> batchTileCase(const CheckCase &forward) {
  ir::BatchAxes axes = ir::findBatchAxes(*forward.graph);
  if (!axes.separable || isSymbolicDim(axes.extent) || axes.extent < 2)
    return std::nullopt;
  CheckCase tiled = forward;
  tiled.label += " tiles";
  tiled.batchTile = 1;
  return tiled;
}

std::string reproducerText(const CheckCase &checkCase, const CheckResult &result) {
  ir::PrintOptions print;
  print.keepLargeTensors = true;
  return fmt::format("// kiln-fuzz-compile reproducer ({}); inputs come from the input names "
                     "(tests/fuzz/compile/InputDomains.h)\n"
                     "// seed: {}\n// input-seed: {}\n// gradient: {}\n// fuse: {}\n// batch-tile: {}\n// {}: {}\n{}",
                     checkCase.label, checkCase.seed, checkCase.inputSeed, checkCase.gradient ? 1 : 0,
                     checkCase.fuse ? 1 : 0, checkCase.batchTile, outcomeName(result.outcome), oneLine(result.message),
                     ir::printGraph(*checkCase.graph, print));
}

CheckCase readReproducer(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail("cannot read the reproducer {}", path);
  std::stringstream text;
  text << in.rdbuf();
  CheckCase checkCase;
  checkCase.label = path.substr(path.find_last_of('/') + 1);
  std::istringstream lines(text.str());
  for (std::string line; std::getline(lines, line) && line.rfind("//", 0) == 0;) {
    auto field = [&](const std::string &key) -> std::optional<uint64_t> {
      std::string prefix = "// " + key + ": ";
      if (line.rfind(prefix, 0) != 0)
        return std::nullopt;
      return std::stoull(line.substr(prefix.size()));
    };
    if (auto v = field("seed"))
      checkCase.seed = *v;
    else if (auto v = field("input-seed"))
      checkCase.inputSeed = *v;
    else if (auto v = field("gradient"))
      checkCase.gradient = *v != 0;
    else if (auto v = field("fuse"))
      checkCase.fuse = *v != 0;
    else if (auto v = field("batch-tile"))
      checkCase.batchTile = static_cast<int64_t>(*v);
  }
  checkCase.graph = ir::parseGraph(text.str(), path);
  return checkCase;
}

} // namespace kiln::fuzz
