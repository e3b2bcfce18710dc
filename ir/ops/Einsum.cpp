// einsum: Einstein summation over one or more operands (ONNX Einsum, numpy.einsum's notation).
//
// The equation names each operand's dims with letters ("ij,jk->ik"); "..." stands for the dims a
// term does not name, and those dims broadcast across operands as in numpy (right-aligned, size
// 1 stretches). A letter repeated within one term takes the diagonal; a letter missing from the
// output is summed over. Without "->" (implicit form) the output is the "..." dims followed by
// the letters that occur exactly once, in ASCII order (upper case before lower case, as numpy).
// An explicit output that omits "..." sums over the "..." dims. Letter dims must agree exactly;
// only "..." dims broadcast. Spaces are ignored.
//
// Every shape fact comes from planEinsum, which inference and evaluation share: it maps each
// distinct dim (the "..." dims, then each letter) to one axis of an index space and gives every
// operand and the output a stride per axis. The reference evaluation is one loop over that
// whole index space, accumulating products into the output: obviously right, and as costly as
// the contraction itself (a batched matmul written as einsum costs what matmul costs).
#include "ir/ops/Einsum.h"

#include <algorithm>
#include <map>

#include "ir/ops/Common.h"

namespace kiln::ir {

using namespace ops;

namespace {

constexpr char kEllipsis = '.'; // stands for "..." inside a parsed term

bool isLabel(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

struct Equation {
  std::vector<std::string> inputs; // one term per operand; letters and at most one kEllipsis
  std::string output;
  bool explicitOutput = false;
};

// Parses one term. `text` has no spaces; `where` names the term in messages.
std::string parseTerm(const std::string &equation, const std::string &text, const std::string &where) {
  std::string term;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (isLabel(c)) {
      term += c;
    } else if (c == '.') {
      if (text.compare(i, 3, "...") != 0)
        fail("equation '{}': {} has a '.' that is not part of '...'", equation, where);
      if (term.find(kEllipsis) != std::string::npos)
        fail("equation '{}': {} has more than one '...'", equation, where);
      term += kEllipsis;
      i += 2;
    } else {
      fail("equation '{}': {} has the character '{}'; terms hold letters a-z, A-Z and '...'", equation, where,
           c);
    }
  }
  return term;
}

Equation parseEquation(const std::string &equation) {
  std::string text;
  for (char c : equation)
    if (c != ' ')
      text += c;
  Equation eq;
  std::string lhs = text;
  size_t arrow = text.find("->");
  if (arrow != std::string::npos) {
    if (text.find("->", arrow + 2) != std::string::npos)
      fail("equation '{}' has more than one '->'", equation);
    lhs = text.substr(0, arrow);
    eq.explicitOutput = true;
    eq.output = parseTerm(equation, text.substr(arrow + 2), "the output term");
  }
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    std::string termText = lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    eq.inputs.push_back(parseTerm(equation, termText, fmt::format("operand term {}", eq.inputs.size())));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return eq;
}

/// The implicit output's letters: those that occur exactly once over all operand terms, in
/// ASCII order (upper case first, as numpy).
std::string implicitOutputLetters(const Equation &eq) {
  std::map<char, int> occurrences; // std::map: ASCII order
  for (const std::string &term : eq.inputs)
    for (char label : term)
      if (label != kEllipsis)
        ++occurrences[label];
  std::string letters;
  for (auto &[label, count] : occurrences)
    if (count == 1)
      letters += label;
  return letters;
}

struct EinsumPlan {
  Shape axisSizes;                                // the index space: "..." dims, then one axis per letter
  std::vector<std::vector<int64_t>> inputStrides; // per operand, per axis; 0 where it does not move
  std::vector<int64_t> outputStrides;             // per axis; 0 for summed axes
  Shape outShape;
  int64_t indexSpaceSize = 0;
};

EinsumPlan planEinsum(const std::string &equation, const std::vector<TensorType> &operands) {
  Equation eq = parseEquation(equation);
  if (eq.inputs.size() != operands.size())
    fail("equation '{}' has {} operand terms but einsum got {} inputs", equation, eq.inputs.size(),
         operands.size());

  // How many dims each operand's "..." covers, and their broadcast shape (right-aligned).
  std::vector<int64_t> ellipsisDims(operands.size(), 0);
  Shape ellipsisShape;
  bool anyEllipsis = false;
  for (size_t k = 0; k < operands.size(); ++k) {
    const std::string &term = eq.inputs[k];
    bool hasEllipsis = term.find(kEllipsis) != std::string::npos;
    auto letters = static_cast<int64_t>(term.size()) - (hasEllipsis ? 1 : 0);
    int64_t rank = operands[k].rank();
    if (!hasEllipsis && letters != rank)
      fail("operand {} ({}) has rank {} but its term '{}' names {} dims", k, operands[k].toString(), rank,
           term, letters);
    if (hasEllipsis && letters > rank)
      fail("operand {} ({}) has rank {}, fewer than the {} letters of its term", k, operands[k].toString(),
           rank, letters);
    if (!hasEllipsis)
      continue;
    anyEllipsis = true;
    ellipsisDims[k] = rank - letters;
    size_t at = term.find(kEllipsis);
    Shape covered(operands[k].shape.begin() + static_cast<int64_t>(at),
                  operands[k].shape.begin() + static_cast<int64_t>(at) + ellipsisDims[k]);
    try {
      ellipsisShape = broadcastShapes(ellipsisShape, covered);
    } catch (const Error &) {
      fail("equation '{}': the dims under '...' of operand {} ({}) do not broadcast with the others' {}",
           equation, k, shapeToString(covered), shapeToString(ellipsisShape));
    }
  }

  EinsumPlan plan;
  plan.axisSizes = ellipsisShape;
  auto ellipsisAxes = static_cast<int64_t>(ellipsisShape.size());
  std::map<char, int64_t> axisOf;                       // letter -> axis
  std::map<char, std::pair<size_t, int64_t>> firstSeen; // letter -> (operand, dim) that fixed its size
  for (size_t k = 0; k < operands.size(); ++k) {
    const Shape &shape = operands[k].shape;
    std::vector<int64_t> dimStrides = contiguousStrides(shape);
    std::vector<int64_t> strides(static_cast<size_t>(ellipsisAxes), 0);
    int64_t dim = 0;
    for (char label : eq.inputs[k]) {
      if (label == kEllipsis) {
        // Right-aligned: the operand's j-th "..." dim is axis (E - count + j). A size-1 dim
        // against a larger broadcast size stays at index 0 (stride 0).
        for (int64_t j = 0; j < ellipsisDims[k]; ++j, ++dim) {
          auto axis = static_cast<size_t>(ellipsisAxes - ellipsisDims[k] + j);
          if (shape[dim] == plan.axisSizes[axis])
            strides[axis] = dimStrides[dim];
        }
        continue;
      }
      auto found = axisOf.find(label);
      if (found == axisOf.end()) {
        found = axisOf.emplace(label, static_cast<int64_t>(plan.axisSizes.size())).first;
        plan.axisSizes.push_back(shape[dim]);
        firstSeen[label] = {k, dim};
      } else if (plan.axisSizes[found->second] != shape[dim]) {
        auto [k0, d0] = firstSeen[label];
        fail(
            "equation '{}': label '{}' has size {} in operand {} (dim {}) but size {} in operand {} (dim {})",
            equation, label, plan.axisSizes[found->second], k0, d0, shape[dim], k, dim);
      }
      strides.resize(plan.axisSizes.size(), 0);
      strides[found->second] += dimStrides[dim]; // a repeated label walks the diagonal
      ++dim;
    }
    plan.inputStrides.push_back(strides);
  }
  for (auto &strides : plan.inputStrides)
    strides.resize(plan.axisSizes.size(), 0);

  // The output's axes, in order.
  std::vector<int64_t> outAxes;
  auto appendEllipsisAxes = [&] {
    for (int64_t a = 0; a < ellipsisAxes; ++a)
      outAxes.push_back(a);
  };
  if (eq.explicitOutput) {
    std::string seen;
    for (char label : eq.output) {
      if (seen.find(label) != std::string::npos)
        fail("equation '{}': the output term names '{}' twice", equation,
             label == kEllipsis ? std::string("...") : std::string(1, label));
      seen += label;
      if (label == kEllipsis) {
        appendEllipsisAxes();
        continue;
      }
      auto found = axisOf.find(label);
      if (found == axisOf.end())
        fail("equation '{}': output label '{}' does not appear in any operand term", equation, label);
      outAxes.push_back(found->second);
    }
  } else {
    if (anyEllipsis)
      appendEllipsisAxes();
    for (char label : implicitOutputLetters(eq))
      outAxes.push_back(axisOf.at(label));
  }
  for (int64_t axis : outAxes)
    plan.outShape.push_back(plan.axisSizes[static_cast<size_t>(axis)]);
  std::vector<int64_t> outDimStrides = contiguousStrides(plan.outShape);
  plan.outputStrides.assign(plan.axisSizes.size(), 0);
  for (size_t d = 0; d < outAxes.size(); ++d)
    plan.outputStrides[static_cast<size_t>(outAxes[d])] = outDimStrides[d];

  plan.indexSpaceSize = 1;
  bool empty = std::find(plan.axisSizes.begin(), plan.axisSizes.end(), 0) != plan.axisSizes.end();
  for (int64_t size : plan.axisSizes)
    if (!empty)
      plan.indexSpaceSize = checkedMul(plan.indexSpaceSize, size, "the index space's size");
  if (empty)
    plan.indexSpaceSize = 0;
  return plan;
}

std::vector<TensorType> inferEinsum(const std::vector<TensorType> &in, const AttrMap &attrs) {
  DType dtype = commonDType(in);
  if (dtype == DType::Bool)
    fail("needs float or integer operands, got bool");
  return {TensorType{dtype, planEinsum(attrString(attrs, "equation"), in).outShape}};
}

// One odometer over the whole index space, moving every operand's offset and the output's by
// their strides. T is double for floats and uint64_t (wrapping) for integers, as in matmul.
template <typename T>
std::vector<T> einsumLoop(const EinsumPlan &plan, const std::vector<std::vector<T>> &operands) {
  std::vector<T> out(static_cast<size_t>(numElements(plan.outShape)), T(0));
  size_t axes = plan.axisSizes.size(), count = operands.size();
  std::vector<int64_t> index(axes, 0), offsets(count, 0);
  int64_t outOffset = 0;
  for (int64_t step = 0; step < plan.indexSpaceSize; ++step) {
    T product = T(1);
    for (size_t k = 0; k < count; ++k)
      product *= operands[k][static_cast<size_t>(offsets[k])];
    out[static_cast<size_t>(outOffset)] += product;
    for (size_t a = axes; a-- > 0;) {
      ++index[a];
      outOffset += plan.outputStrides[a];
      for (size_t k = 0; k < count; ++k)
        offsets[k] += plan.inputStrides[k][a];
      if (index[a] < plan.axisSizes[a])
        break;
      // Wrap this axis back to 0 and carry into the next one.
      outOffset -= plan.outputStrides[a] * index[a];
      for (size_t k = 0; k < count; ++k)
        offsets[k] -= plan.inputStrides[k][a] * index[a];
      index[a] = 0;
    }
  }
  return out;
}

std::vector<Tensor> evalEinsum(const std::vector<Tensor> &in, const AttrMap &attrs,
                               const std::vector<TensorType> &outTypes) {
  std::vector<TensorType> types;
  for (const Tensor &t : in)
    types.push_back(t.type());
  EinsumPlan plan = planEinsum(attrString(attrs, "equation"), types);
  Tensor out(outTypes[0]);
  if (isFloat(out.dtype())) {
    std::vector<std::vector<double>> operands;
    for (const Tensor &t : in)
      operands.push_back(t.toDoubles());
    std::vector<double> values = einsumLoop(plan, operands);
    for (size_t i = 0; i < values.size(); ++i)
      out.setDouble(static_cast<int64_t>(i), values[i]);
  } else {
    std::vector<std::vector<uint64_t>> operands;
    for (const Tensor &t : in) {
      std::vector<uint64_t> values(static_cast<size_t>(t.numElements()));
      for (int64_t i = 0; i < t.numElements(); ++i)
        values[static_cast<size_t>(i)] = static_cast<uint64_t>(t.getInt(i));
      operands.push_back(std::move(values));
    }
    std::vector<uint64_t> values = einsumLoop(plan, operands);
    for (size_t i = 0; i < values.size(); ++i)
      out.setInt(static_cast<int64_t>(i), static_cast<int64_t>(values[i]));
  }
  return {out};
}

} // namespace

std::optional<EinsumLetterTerms> einsumLetterTerms(const std::string &equation) {
  Equation eq = parseEquation(equation);
  EinsumLetterTerms terms{eq.inputs, eq.explicitOutput ? eq.output : implicitOutputLetters(eq)};
  for (const std::string &term : terms.inputs)
    if (term.find(kEllipsis) != std::string::npos)
      return std::nullopt;
  if (terms.output.find(kEllipsis) != std::string::npos)
    return std::nullopt;
  return terms;
}

OpDef defineEinsum() {
  OpDef def;
  def.attrs = {stringAttr("equation")};
  def.infer = inferEinsum;
  def.eval = evalEinsum;
  return def;
}

} // namespace kiln::ir
