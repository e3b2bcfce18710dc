// einsum-to-matmul: a two-operand float einsum that is a (batched) matrix product becomes
// permutes and reshapes around one matmul.
//
// Exporters write attention and bilinear layers as einsum ("bhid,bhjd->bhij" in torchvision's
// MaxViT, "bij,bjk->bik" elsewhere). Codegen lowers einsum as a generic loop nest, one scalar
// product at a time with a double accumulator (codegen/EmitEinsum.cpp), while matmul runs on
// the packed GEMM: MaxViT-T spent 95 of its 226 ms in eight such einsums.
//
// Each letter of such an equation is one of: batch (in both operands and the output), row (in
// the first operand and the output), column (in the second and the output) or summed (in both
// operands, not the output). Then
//   A' = permute(A, batch rows summed) reshaped to [batch..., rows, summed]
//   B' = permute(B, batch summed columns) reshaped to [batch..., summed, columns]
//   out = permute(reshape(matmul(A', B'), [batch..., row dims..., column dims...]), output order)
// where identity permutes and reshapes are left out; simplify-algebra and fusion turn the
// rest into operand views of the GEMM. Equations with "...", a letter repeated in one term
// (a diagonal), a letter in only one operand and not in the output (a sum of that operand
// alone), more than two operands, or integer operands are left as they are.
//
// Statistics: "einsums to matmul".
#include "passes/simplify/EinsumToMatmul.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "core/SymbolicDim.h"
#include "ir/Builder.h"
#include "ir/ops/Einsum.h"

namespace kiln::passes {

using ir::Node;
using ir::OpKind;
using ir::Value;

namespace {

/// The letters of one matrix-product einsum, by role, each group in the order the rewrite
/// lays them out.
struct Roles {
  std::string batch, rows, columns, summed;
};

std::optional<Roles> matrixProductRoles(const ir::EinsumLetterTerms &terms) {
  if (terms.inputs.size() != 2)
    return std::nullopt;
  const std::string &a = terms.inputs[0], &b = terms.inputs[1], &out = terms.output;
  auto has = [](const std::string &term, char letter) { return term.find(letter) != std::string::npos; };
  auto repeats = [](const std::string &term) {
    std::string sorted = term;
    std::sort(sorted.begin(), sorted.end());
    return std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();
  };
  if (repeats(a) || repeats(b) || repeats(out))
    return std::nullopt;
  Roles roles;
  for (char letter : out) {
    if (has(a, letter) && has(b, letter))
      roles.batch += letter;
    else if (has(a, letter))
      roles.rows += letter;
    else
      roles.columns += letter;
  }
  for (char letter : a)
    if (!has(out, letter)) {
      if (!has(b, letter))
        return std::nullopt; // summed over the first operand alone
      roles.summed += letter;
    }
  for (char letter : b)
    if (!has(out, letter) && !has(a, letter))
      return std::nullopt; // summed over the second operand alone
  return roles;
}

Shape sizesOf(const std::string &letters, const std::string &term, const Shape &shape) {
  Shape sizes;
  for (char letter : letters)
    sizes.push_back(shape[term.find(letter)]);
  return sizes;
}

int64_t product(const Shape &sizes) {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<int64_t>());
}

/// `value` with its dims reordered to `letters` (a permutation of `term`), unless already so.
Value *permuteTo(ir::Builder &b, Value *value, const std::string &term, const std::string &letters) {
  if (term == letters)
    return value;
  std::vector<int64_t> perm;
  for (char letter : letters)
    perm.push_back(static_cast<int64_t>(term.find(letter)));
  return b.create(OpKind::Permute, {value}, {{"perm", perm}});
}

Value *reshapeTo(ir::Builder &b, Value *value, const Shape &shape) {
  if (value->shape() == shape)
    return value;
  return b.create(OpKind::Reshape, {value}, {{"shape", shape}});
}

Shape concat(std::initializer_list<Shape> parts) {
  Shape out;
  for (const Shape &part : parts)
    out.insert(out.end(), part.begin(), part.end());
  return out;
}

/// Rewrites `einsum` when it is a matrix product; returns whether it did.
bool rewrite(ir::Graph &graph, Node *einsum) {
  Value *a = einsum->input(0), *bOperand = einsum->input(1);
  if (!isFloat(einsum->output()->dtype()) || a->dtype() != bOperand->dtype() || !isStaticShape(a->shape()) ||
      !isStaticShape(bOperand->shape()))
    return false;
  std::optional<ir::EinsumLetterTerms> terms = ir::einsumLetterTerms(einsum->attrString("equation"));
  if (!terms)
    return false;
  std::optional<Roles> roles = matrixProductRoles(*terms);
  if (!roles)
    return false;
  const std::string &termA = terms->inputs[0], &termB = terms->inputs[1];
  const Shape batch = sizesOf(roles->batch, termA, a->shape());
  const Shape rows = sizesOf(roles->rows, termA, a->shape());
  const Shape summed = sizesOf(roles->summed, termA, a->shape());
  const Shape columns = sizesOf(roles->columns, termB, bOperand->shape());

  ir::Builder b(graph);
  b.setInsertionPoint(einsum);
  Value *left = reshapeTo(b, permuteTo(b, a, termA, roles->batch + roles->rows + roles->summed),
                          concat({batch, {product(rows), product(summed)}}));
  Value *right = reshapeTo(b, permuteTo(b, bOperand, termB, roles->batch + roles->summed + roles->columns),
                           concat({batch, {product(summed), product(columns)}}));
  Value *result = b.create(OpKind::MatMul, {left, right});
  result = reshapeTo(b, result, concat({batch, rows, columns}));
  result = permuteTo(b, result, roles->batch + roles->rows + roles->columns, terms->output);
  std::string name = einsum->output()->name();
  einsum->output()->replaceAllUsesWith(result);
  graph.eraseNode(einsum);
  result->setName(std::move(name)); // a named output keeps its name
  return true;
}

class EinsumToMatmulPass final : public Pass {
public:
  std::string_view name() const override { return "einsum-to-matmul"; }

  bool run(ir::Graph &graph, PassContext &context) override {
    std::vector<Node *> einsums;
    for (Node *node : graph.nodes())
      if (node->op() == OpKind::Einsum && node->numInputs() == 2)
        einsums.push_back(node);
    bool changed = false;
    for (Node *einsum : einsums)
      if (rewrite(graph, einsum)) {
        context.stats.add("einsums to matmul");
        changed = true;
      }
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createEinsumToMatmulPass() { return std::make_unique<EinsumToMatmulPass>(); }

} // namespace kiln::passes
