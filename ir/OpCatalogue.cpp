// The op catalogue that `kiln-dump --list-ops` prints: every op of ir/Ops.def with its traits,
// and for each composite the primitives its decomposition builds on small example inputs.
#include "ir/OpCatalogue.h"

#include <algorithm>
#include <exception>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/Error.h"
#include "ir/Builder.h"
#include "ir/Evaluator.h"
#include "ir/Op.h"

namespace kiln::ir {

namespace {

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
  TensorType img{DType::F32, {1, 2, 4, 4}}, f2{DType::F32, {2}}, scalar{DType::F32, {}};
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
      {"sgd_update", {f23, f23, scalar, f23, scalar}, {{"momentum", 0.9}}},
      {"adam_update", {f23, f23, f23, f23, scalar, scalar}, {}},
      {"quantize_linear", {f23, scalar, {DType::U8, {}}}, {}},
      {"dequantize_linear", {{DType::U8, {2, 3}}, scalar, {DType::U8, {}}}, {}},
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

} // namespace

std::string formatOpCatalogue() {
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

} // namespace kiln::ir
