// A whole model to one translation unit (see EmitModel.h).
//
// Stages:
//  1. Number the graph's inputs, outputs and weights (parameters in order, then large
//     constants in node order).
//  2. One kernel per non-source node, in node order, with refs for its operands (kernel
//     operands in order, inlined constants skipped) and results; aliased reshapes, and concats
//     laid out over their operands, are skipped.
//  3. Copy kernels for outputs no node writes (inputs, weights, constants, repeats).
//  4. The descriptor tables and kiln_model().
#include "codegen/EmitModel.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "codegen/CxxCompiler.h"
#include "codegen/ScalarOps.h"
#include "core/Error.h"
#include "ir/KernelOutline.h"
#include "ir/Printer.h"
#include "passes/fusion/AccumulatedOperand.h"
#include "runtime/KernelAbi.h"

// kKernelAbiHeader: runtime/KernelAbi.h's text, embedded at build time (cmake/EmbedText.cmake)
// so that codegen works from an installed kiln, with no source tree to read it from.
#include "codegen/KernelAbiText.inc"

namespace kiln::codegen {

namespace {

/// The name a kernel's code is emitted under before it is known to be new: no other name of
/// generated code contains it.
constexpr const char *kSharedKernelName = "kSharedKernelPlaceholder";

std::string replaceAll(std::string text, const std::string &from, const std::string &to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

} // namespace

using ir::OpKind;

const std::string &kernelAbiText() {
  static const std::string text = [] {
    std::string header = kKernelAbiHeader;
    // The header guards itself with #pragma once, which means nothing inside another file.
    size_t pragma = header.find("#pragma once");
    if (pragma != std::string::npos)
      header.erase(pragma, std::string("#pragma once").size());
    return header;
  }();
  return text;
}

namespace {


std::string identifierPart(std::string_view text) {
  std::string out;
  for (char ch : text)
    out += (std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_');
  return out;
}

// "matmul_add_relu": the ops a kernel computes, movement ops left out, at most 48 characters.
std::string describeNode(const ir::Node &node) {
  if (node.op() != OpKind::Kernel || !node.body())
    return identifierPart(node.opName());
  std::string out;
  for (const ir::Node *inner : node.body()->nodes()) {
    OpKind op = inner->op();
    if (op == OpKind::Constant || op == OpKind::Reshape || op == OpKind::Permute || op == OpKind::Broadcast)
      continue;
    std::string part = identifierPart(inner->opName());
    if (out.size() + part.size() + 1 > 48)
      break;
    out += (out.empty() ? "" : "_") + part;
  }
  return out.empty() ? "kernel" : out;
}

struct Ref {
  int kind = 0;
  int index = 0;
  int64_t offset = 0;
  int64_t bytes = 0;
};

class ModelEmitter {
public:
  /// `plainOnly`: weights the runtime must keep as they are (transformedOverBudget).
  ModelEmitter(const ir::Graph &graph, const passes::MemoryPlan &plan, std::string symbolPrefix,
               const std::vector<std::pair<size_t, std::string>> &outputsOverParams, const EmitOptions &options,
               std::set<const ir::Value *> plainOnly = {})
      : graph_(graph), plan_(plan), names_(ir::printedValueNames(graph)), prefix_(std::move(symbolPrefix)),
        outputsOverParams_(outputsOverParams), options_(options), plainOnly_(std::move(plainOnly)) {}

  ModelSource run() {
    numberBuffers();
    for (const ir::Node *node : graph_.nodes()) {
      if (node->op() == OpKind::Param || node->op() == OpKind::Constant || isAliasedView(*node) ||
          isConcatInPlace(*node))
        continue;
      std::string label = "%" + names_.at(node->output());
      Unit unit = node->op() == OpKind::Kernel ? unitForKernel(*node, label) : unitForNode(*node, label);
      std::vector<Ref> refs;
      for (const ir::Value *operand : unitOperandValues(*node)) {
        refs.push_back(refFor(operand));
        unit.soleWeightOperands.push_back(isSoleWeight(*operand));
      }
      unit.exactConvolutions = options_.exactConvolutions;
      unit.precision = options_.precision;
      for (const ir::Value *output : node->outputs())
        refs.push_back(refFor(output));
      if (node->op() == OpKind::Kernel)
        unit.accumulatedOperand = accumulatedOperandInPlan(*node);
      addLaunch(unit, describeNode(*node), refs, node);
    }
    for (size_t j = 0; j < graph_.outputs().size(); ++j) {
      const ir::Value *value = graph_.outputs()[j];
      bool written = value->producer() && value->producer()->op() != OpKind::Param &&
                     value->producer()->op() != OpKind::Constant && firstOutput_.at(value) == static_cast<int>(j);
      if (written)
        continue;
      Unit unit = unitForCopy(*value, fmt::format("output {}", j));
      std::vector<Ref> refs;
      if (!unit.body->inputs().empty())
        refs.push_back(refFor(value));
      refs.push_back(Ref{KILN_OUTPUT_KIND, static_cast<int>(j), 0, static_cast<int64_t>(value->type().byteSize())});
      addLaunch(unit, "copy", refs, nullptr);
    }
    model_.arenaBytes = plan_.arenaBytes;
    model_.symbolPrefix = prefix_;
    model_.modelSymbol = prefix_ + "kiln_model";
    model_.body = kernels_ + descriptor();
    model_.source = header() + model_.body;
    return std::move(model_);
  }

private:
  static constexpr int KILN_ARENA_KIND = 0, KILN_INPUT_KIND = 1, KILN_OUTPUT_KIND = 2, KILN_WEIGHT_KIND = 3;

  void numberBuffers() {
    for (size_t i = 0; i < graph_.inputs().size(); ++i)
      inputIndex_[graph_.inputs()[i]] = static_cast<int>(i);
    for (size_t j = 0; j < graph_.outputs().size(); ++j)
      firstOutput_.emplace(graph_.outputs()[j], static_cast<int>(j));
    for (const ir::Node *param : graph_.params()) {
      weightIndex_[param->output()] = static_cast<int>(model_.weights.size());
      model_.weights.push_back({param->attrString("name"), param->output(), std::nullopt});
    }
    for (const auto &[output, paramName] : outputsOverParams_) {
      if (output >= graph_.outputs().size())
        fail("codegen: internal error: output {} said to overwrite '{}' does not exist", output, paramName);
      for (const WeightInfo &weight : model_.weights)
        if (weight.name == paramName)
          aliasedOutputWeights_.insert({static_cast<int>(output), weightIndex_.at(weight.value)});
    }
    int constants = 0;
    for (const ir::Node *node : graph_.nodes()) {
      if (node->op() != OpKind::Constant || node->output()->type().numElements() <= ir::kMaxInlinedConstantElements)
        continue;
      weightIndex_[node->output()] = static_cast<int>(model_.weights.size());
      model_.weights.push_back({fmt::format("constant.{}", constants++), node->output(), std::nullopt});
    }
  }

  /// A weight (constant or parameter) that exactly one node reads, that is no graph output and
  /// that no output overwrites: its one kernel may choose how the runtime stores it.
  bool isSoleWeight(const ir::Value &value) const {
    auto index = weightIndex_.find(&value);
    if (index == weightIndex_.end() || value.uses().size() != 1 || firstOutput_.count(&value) ||
        plainOnly_.count(&value))
      return false;
    if (options_.paramsChange && value.producer()->op() == OpKind::Param)
      return false; // a copy repacked at load would not see the values change
    for (const auto &[output, weight] : aliasedOutputWeights_)
      if (weight == index->second)
        return false;
    return true;
  }

  /// The operand the plan lets `kernel` accumulate into (its result placed over it), or -1.
  int accumulatedOperandInPlan(const ir::Node &kernel) const {
    const int operand = passes::accumulatedOperand(kernel);
    if (operand < 0)
      return -1;
    for (const passes::BufferReuse &reuse : plan_.reuses)
      if (reuse.output == kernel.output() && reuse.operand == kernel.input(operand) &&
          reuse.kind == passes::ReuseKind::InPlace)
        return operand;
    return -1;
  }

  bool isAliasedView(const ir::Node &node) const {
    if (node.op() != OpKind::Reshape)
      return false;
    for (const passes::BufferReuse &reuse : plan_.reuses)
      if (reuse.output == node.output() && reuse.kind == passes::ReuseKind::View)
        return true;
    return false;
  }

  /// A concat the plan laid out over its operands: its producers wrote its bytes already.
  bool isConcatInPlace(const ir::Node &node) const {
    return node.op() == OpKind::Concat && plan_.isConcatInPlace(node.output());
  }

  Ref refFor(const ir::Value *value) const {
    int64_t bytes = static_cast<int64_t>(value->type().byteSize());
    if (auto it = inputIndex_.find(value); it != inputIndex_.end())
      return {KILN_INPUT_KIND, it->second, 0, bytes};
    if (auto it = firstOutput_.find(value); it != firstOutput_.end() && value->producer() &&
                                            value->producer()->op() != OpKind::Param &&
                                            value->producer()->op() != OpKind::Constant)
      return {KILN_OUTPUT_KIND, it->second, 0, bytes};
    if (auto it = weightIndex_.find(value); it != weightIndex_.end())
      return {KILN_WEIGHT_KIND, it->second, 0, bytes};
    int64_t offset = plan_.offsetOf(value);
    if (offset < 0)
      fail("codegen: internal error: value %{} has no buffer in the memory plan", names_.at(value));
    return {KILN_ARENA_KIND, 0, offset, bytes};
  }

  bool overlaps(const Ref &a, const Ref &b) const {
    if (a.kind == KILN_OUTPUT_KIND && b.kind == KILN_WEIGHT_KIND)
      return aliasedOutputWeights_.count({a.index, b.index}) > 0;
    if (a.kind == KILN_WEIGHT_KIND && b.kind == KILN_OUTPUT_KIND)
      return aliasedOutputWeights_.count({b.index, a.index}) > 0;
    if (a.kind != b.kind || (a.kind != KILN_ARENA_KIND && a.index != b.index))
      return false;
    return a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
  }

  void addLaunch(const Unit &unit, const std::string &description, const std::vector<Ref> &refs,
                 const ir::Node *node) {
    bool disjoint = true;
    for (size_t i = 0; i < refs.size(); ++i)
      for (size_t k = i + 1; k < refs.size(); ++k)
        disjoint = disjoint && !overlaps(refs[i], refs[k]);
    int index = static_cast<int>(model_.launches.size());
    std::string name = fmt::format("k{}_{}", index, description);
    // Emitted under a placeholder name first: a kernel whose code is another's but for its
    // names (the same layer repeated, as every block of a transformer or a ResNet stage is)
    // runs the other's function, so the C++ compiler sees it once.
    KernelSource kernel = emitKernel(unit, prefix_ + kSharedKernelName, prefix_ + "kiln_" + kSharedKernelName + "_" + description,
                                     disjoint);
    for (const PackedWeight &packed : kernel.packedOperands) {
      const Ref &ref = refs.at(static_cast<size_t>(packed.operand));
      if (ref.kind != KILN_WEIGHT_KIND)
        fail("codegen: internal error: {} reads operand {} prepacked, which is not a weight", name, packed.operand);
      model_.weights.at(static_cast<size_t>(ref.index)).packing = packed;
    }
    const std::string code = kernel.text.substr(kernel.text.find('\n') + 1); // after the comment naming the node
    auto [shared, isNew] = functionOfCode_.emplace(code, prefix_ + "kiln_" + name);
    if (isNew) {
      // Each kernel a unit of its own (CxxCompiler.h): compiled with others or apart.
      kernels_ += std::string(kSourceUnitMarker) + "\n" + replaceAll(kernel.text, kSharedKernelName, fmt::format("k{}", index));
      launchFunctions_.push_back(shared->second);
    } else {
      ++model_.sharedKernels;
    }
    launchLines_.push_back(fmt::format("  {{{}, {}, {}, {}}},", shared->second, cString(name), refs_.size(), refs.size()));
    for (const Ref &ref : refs)
      refs_.push_back(ref);
    model_.launches.push_back({name, kernel.strategy, node});
  }

  std::string header() const {
    return fmt::format("// Generated by kiln codegen from graph @{}. Do not edit.\n", graph_.name()) + sourcePrelude();
  }

  std::string tensorDescs(const std::string &table, const std::vector<std::pair<std::string, const ir::Value *>> &values) {
    if (values.empty())
      return "";
    std::string shapes, entries;
    for (size_t i = 0; i < values.size(); ++i) {
      const Shape &shape = values[i].second->shape();
      std::string shapeName = "NULL";
      if (!shape.empty()) {
        shapeName = fmt::format("{}_shape{}", table, i);
        shapes += fmt::format("static const int64_t {}[{}] = {{{}}};\n", shapeName, shape.size(), fmt::join(shape, ", "));
      }
      entries += fmt::format("  {{{}, {}, {}, {}}},\n", cString(values[i].first),
                             cString(std::string(dtypeName(values[i].second->dtype()))), shape.size(), shapeName);
    }
    return shapes + fmt::format("static const kiln_tensor_desc {}[{}] = {{\n{}}};\n", table, values.size(), entries);
  }

  std::string descriptor() {
    std::vector<std::pair<std::string, const ir::Value *>> inputs, outputs, weights;
    for (const ir::Value *input : graph_.inputs())
      inputs.emplace_back(names_.at(input), input);
    // The runtime finds outputs by name, so each needs its own: a named value returned twice
    // (an input passed through as two outputs) gives its repeats a suffix.
    std::set<std::string> outputNames;
    for (size_t j = 0; j < graph_.outputs().size(); ++j) {
      const ir::Value *output = graph_.outputs()[j];
      std::string name = graph_.outputName(j).empty() ? fmt::format("output{}", j) : graph_.outputName(j);
      std::string unique = name;
      for (int repeat = 1; !outputNames.insert(unique).second; ++repeat)
        unique = fmt::format("{}_{}", name, repeat);
      outputs.emplace_back(unique, output);
    }
    for (const WeightInfo &weight : model_.weights)
      weights.emplace_back(weight.name, weight.value);
    // A unit too: the kernels it names are declared, in case they compile apart.
    std::string text = std::string(kSourceUnitMarker) + "\n// ---- the model ----\n";
    for (const std::string &function : launchFunctions_)
      text += fmt::format("extern \"C\" void {}(const kiln_rt *rt, void *const *buffers);\n", function);
    std::string inputsTable = prefix_ + "kiln_inputs", outputsTable = prefix_ + "kiln_outputs",
                weightsTable = prefix_ + "kiln_weights", refsTable = prefix_ + "kiln_refs",
                launchesTable = prefix_ + "kiln_launches";
    text += tensorDescs(inputsTable, inputs) + tensorDescs(outputsTable, outputs) + tensorDescs(weightsTable, weights);
    std::string packingsTable = prefix_ + "kiln_packings", packingEntries;
    int packings = 0;
    for (size_t w = 0; w < model_.weights.size(); ++w)
      if (const std::optional<PackedWeight> &b = model_.weights[w].packing) {
        packingEntries +=
            fmt::format("  {{{}, {}, {}, {}, {}, {}}},\n", w, b->kind, b->k, b->n, b->strideK, b->strideN);
        ++packings;
      }
    if (packings > 0)
      text += fmt::format("static const kiln_weight_packing {}[{}] = {{\n{}}};\n", packingsTable, packings,
                          packingEntries);
    if (!refs_.empty()) {
      text += fmt::format("static const kiln_buffer_ref {}[{}] = {{\n", refsTable, refs_.size());
      for (const Ref &ref : refs_)
        text += fmt::format("  {{{}, {}, {}}},\n", ref.kind, ref.index, ref.offset);
      text += "};\n";
    }
    if (!launchLines_.empty())
      text += fmt::format("static const kiln_launch {}[{}] = {{\n{}\n}};\n", launchesTable, launchLines_.size(),
                          fmt::join(launchLines_, "\n"));
    const EmitOptions::BatchTiling &tiling = options_.batchTiling;
    std::string batchedTable = prefix_ + "kiln_batched_inputs";
    if (tiling.tile > 0) {
      if (tiling.batchedInputs.size() != inputs.size())
        fail("emitModel: batch tiling flags {} inputs, the graph has {}", tiling.batchedInputs.size(), inputs.size());
      std::vector<int> flags(tiling.batchedInputs.begin(), tiling.batchedInputs.end());
      flags.resize(std::max<size_t>(flags.size(), 1)); // a C array has at least one element
      text += fmt::format("static const int32_t {}[{}] = {{{}}};\n", batchedTable, flags.size(), fmt::join(flags, ", "));
    }
    auto table = [](bool present, const std::string &name) { return present ? name : std::string("NULL"); };
    text += fmt::format("\nextern \"C\" const kiln_model_desc *{}kiln_model(void) {{\n", prefix_) +
            "  static const kiln_model_desc desc = {\n";
    text += fmt::format("    KILN_ABI_VERSION, {}, {}, {}, {},\n", inputs.size(), outputs.size(), weights.size(),
                        launchLines_.size());
    text += fmt::format("    {}, {}, {},\n", table(!inputs.empty(), inputsTable), table(!outputs.empty(), outputsTable),
                        table(!weights.empty(), weightsTable));
    text += fmt::format("    {}, {}, {}, NULL, {}, {},\n", table(!launchLines_.empty(), launchesTable),
                        table(!refs_.empty(), refsTable), plan_.arenaBytes, packings,
                        table(packings > 0, packingsTable));
    text += fmt::format("    {}, {}, {}, {}}};\n  return &desc;\n}}\n", tiling.tile, tiling.tile > 0 ? tiling.extent : 0,
                        tiling.tile > 0 && tiling.extent == 0 ? cString(tiling.symbol) : std::string("NULL"),
                        table(tiling.tile > 0, batchedTable));
    return text;
  }

  const ir::Graph &graph_;
  const passes::MemoryPlan &plan_;
  std::unordered_map<const ir::Value *, std::string> names_;
  std::map<const ir::Value *, int> inputIndex_, firstOutput_, weightIndex_;
  ModelSource model_;
  std::string kernels_;
  std::vector<std::string> launchFunctions_; // the entry points emitted
  /// Emitted kernels' code (under the placeholder name) -> their entry point.
  std::map<std::string, std::string> functionOfCode_;
  std::vector<std::string> launchLines_;
  std::vector<Ref> refs_;
  std::string prefix_; // starts every name the model defines
  const std::vector<std::pair<size_t, std::string>> &outputsOverParams_;
  EmitOptions options_;
  std::set<std::pair<int, int>> aliasedOutputWeights_; // (output index, weight index) sharing storage
  std::set<const ir::Value *> plainOnly_;
};

/// Bytes that packing `weight` at load adds to its plain form: Winograd's transformed weights
/// hold 16 (F(2,3)) or 36 (F(4,3)) floats per 9 (F(2,3) in bf16 holds 16 half-size ones: no
/// more than the plain weights); the other packings keep the size or shrink it.
int64_t packingGrowth(const WeightInfo &weight) {
  if (!weight.packing)
    return 0;
  const int64_t plain = static_cast<int64_t>(weight.value->type().byteSize());
  switch (weight.packing->kind) {
  case KILN_PACK_CONV_WINOGRAD_F2: return plain * 7 / 9;
  case KILN_PACK_CONV_WINOGRAD_F4: return plain * 27 / 9;
  default: return 0;
  }
}

/// The weights whose transformed copies must go so that all of them add at most
/// kTransformedShare of the plain weights plus kTransformedAllowance: the largest first, which
/// are the deepest layers on the smallest maps, where a stored transform gains least per byte
/// (Conv2dWinogradPlan.cpp's tables; on Zen 5, 1024 -> 1024 at 7x7 ran 1-20% faster with it,
/// for 29 MB). Wide-ResNet-50's 122 MB of them kept its peak resident set 4 MB over issue 24's
/// bound of 1.3 x (weights + arena) + 64 MB; within this budget every model's resident set stays
/// under that bound as long as the rest of the process takes under ~30 MB.
std::set<const ir::Value *> transformedOverBudget(const std::vector<WeightInfo> &weights) {
  constexpr double kTransformedShare = 0.3;
  constexpr int64_t kTransformedAllowance = int64_t{32} << 20;
  int64_t plain = 0, grown = 0;
  std::vector<std::pair<int64_t, size_t>> growth; // (bytes, weight), largest first
  for (size_t i = 0; i < weights.size(); ++i) {
    plain += static_cast<int64_t>(weights[i].value->type().byteSize());
    if (const int64_t bytes = packingGrowth(weights[i])) {
      grown += bytes;
      growth.emplace_back(bytes, i);
    }
  }
  std::stable_sort(growth.begin(), growth.end(), [](const auto &a, const auto &b) { return a.first > b.first; });
  const int64_t budget = static_cast<int64_t>(kTransformedShare * static_cast<double>(plain)) + kTransformedAllowance;
  std::set<const ir::Value *> plainOnly;
  for (const auto &[bytes, index] : growth) {
    if (grown <= budget)
      break;
    plainOnly.insert(weights[index].value);
    grown -= bytes;
  }
  return plainOnly;
}

} // namespace

std::string cString(const std::string &text) {
  std::string out = "\"";
  for (unsigned char ch : text) {
    if (ch == '"' || ch == '\\')
      out += '\\', out += static_cast<char>(ch);
    else if (ch < 0x20 || ch >= 0x7f)
      out += fmt::format("\\{:03o}", ch);
    else
      out += static_cast<char>(ch);
  }
  return out + "\"";
}

std::string sourcePrelude() {
  std::string text = "#include <algorithm>\n#include <cmath>\n#include <cstdint>\n#include <cstdlib>\n#include <cstring>\n"
                     "#include <limits>\n#include <stdint.h>\n\n";
  text += "// ---- runtime/KernelAbi.h ----\n" + kernelAbiText() + "// ---- end of runtime/KernelAbi.h ----\n\n";
  return text + preludeHelpers() + "\n";
}

ModelSource emitModel(const ir::Graph &graph, const passes::MemoryPlan &plan, const std::string &symbolPrefix,
                      const std::vector<std::pair<size_t, std::string>> &outputsOverParams, const EmitOptions &options) {
  for (char ch : symbolPrefix)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_')
      fail("codegen: symbol prefix '{}' is not a C identifier part", symbolPrefix);
  ModelSource model = ModelEmitter(graph, plan, symbolPrefix, outputsOverParams, options).run();
  std::set<const ir::Value *> plainOnly = transformedOverBudget(model.weights);
  if (plainOnly.empty())
    return model;
  // Emitted again with those weights plain: their convolutions then choose as for weights they
  // cannot transform ahead (the GEMM, or Winograd transforming per call).
  return ModelEmitter(graph, plan, symbolPrefix, outputsOverParams, options, std::move(plainOnly)).run();
}

} // namespace kiln::codegen
