// Einsum as a generic stage (codegen/GenericContraction.h): one loop nest over the output
// (rows = every output dim but the last, parallel; the last output dim the loop inside) and,
// per output element, nested loops over the summed axes accumulating the operands' product.
//
// The index space is built as the reference evaluator builds it (ir/ops/Einsum.cpp, whose
// inference already validated the equation against the operand shapes): the "..." dims
// (broadcast right-aligned across operands) first, then one axis per letter in order of first
// appearance; each operand moves by its contiguous dim strides along its axes (a repeated letter
// adds its strides: the diagonal; a size-1 "..." dim against a larger size stays at 0). Floats
// accumulate in double and integers in wrapping uint64, multiplied in operand order, as the
// evaluator does.
#include <algorithm>
#include <map>

#include "codegen/GenericContraction.h"
#include "codegen/ScalarOps.h"
#include "core/Error.h"
#include "core/ShapeMath.h"

namespace kiln::codegen {

namespace {

constexpr char kEllipsis = '.';

struct EinsumSpace {
  Shape sizes;                                    // per axis
  std::vector<std::vector<int64_t>> operandSteps; // per operand, per axis
  std::vector<size_t> outAxes;
};

// numpy broadcasting of two shapes that inference already found compatible.
Shape broadcastTogether(const Shape &a, const Shape &b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1, db = i < b.size() ? b[b.size() - 1 - i] : 1;
    out[out.size() - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

std::string parseTerm(const std::string &text) {
  std::string term;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '.') {
      term += kEllipsis;
      i += 2;
    } else {
      term += text[i];
    }
  }
  return term;
}

EinsumSpace einsumSpace(const ir::Node &node) {
  std::string text;
  for (char c : node.attrString("equation"))
    if (c != ' ')
      text += c;
  size_t arrow = text.find("->");
  bool explicitOutput = arrow != std::string::npos;
  std::string lhs = explicitOutput ? text.substr(0, arrow) : text;
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(parseTerm(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  if (terms.size() != node.numInputs())
    fail("codegen: einsum equation '{}' does not match its {} operands", node.attrString("equation"), node.numInputs());

  // The broadcast shape of the "..." dims.
  std::vector<int64_t> ellipsisDims(terms.size(), 0);
  Shape ellipsisShape;
  bool anyEllipsis = false;
  for (size_t k = 0; k < terms.size(); ++k) {
    size_t at = terms[k].find(kEllipsis);
    if (at == std::string::npos)
      continue;
    anyEllipsis = true;
    const Shape &shape = node.input(k)->shape();
    ellipsisDims[k] = static_cast<int64_t>(shape.size()) - static_cast<int64_t>(terms[k].size() - 1);
    Shape covered(shape.begin() + static_cast<int64_t>(at), shape.begin() + static_cast<int64_t>(at) + ellipsisDims[k]);
    ellipsisShape = broadcastTogether(ellipsisShape, covered);
  }
  EinsumSpace space;
  space.sizes = ellipsisShape;
  size_t ellipsisAxes = ellipsisShape.size();
  std::map<char, size_t> axisOf;
  std::map<char, int> occurrences;
  for (size_t k = 0; k < terms.size(); ++k) {
    const Shape &shape = node.input(k)->shape();
    std::vector<int64_t> dimStrides = contiguousStrides(shape), steps(ellipsisAxes, 0);
    size_t dim = 0;
    for (char label : terms[k]) {
      if (label == kEllipsis) {
        for (int64_t j = 0; j < ellipsisDims[k]; ++j, ++dim) {
          size_t axis = ellipsisAxes - static_cast<size_t>(ellipsisDims[k]) + static_cast<size_t>(j);
          if (shape[dim] == space.sizes[axis])
            steps[axis] = dimStrides[dim];
        }
        continue;
      }
      ++occurrences[label];
      auto found = axisOf.find(label);
      if (found == axisOf.end()) {
        found = axisOf.emplace(label, space.sizes.size()).first;
        space.sizes.push_back(shape[dim]);
      }
      steps.resize(space.sizes.size(), 0);
      steps[found->second] += dimStrides[dim];
      ++dim;
    }
    space.operandSteps.push_back(steps);
  }
  for (auto &steps : space.operandSteps)
    steps.resize(space.sizes.size(), 0);
  auto appendEllipsisAxes = [&] {
    for (size_t a = 0; a < ellipsisAxes; ++a)
      space.outAxes.push_back(a);
  };
  if (explicitOutput) {
    for (char label : parseTerm(text.substr(arrow + 2))) {
      if (label == kEllipsis)
        appendEllipsisAxes();
      else
        space.outAxes.push_back(axisOf.at(label));
    }
  } else {
    if (anyEllipsis)
      appendEllipsisAxes();
    for (const auto &[label, count] : occurrences)
      if (count == 1)
        space.outAxes.push_back(axisOf.at(label));
  }
  Shape outShape;
  for (size_t axis : space.outAxes)
    outShape.push_back(space.sizes[axis]);
  if (outShape != node.output()->shape())
    fail("codegen: internal error: einsum '{}' plans output {} but its type is {}", node.attrString("equation"),
         shapeToString(outShape), shapeToString(node.output()->shape()));
  return space;
}

// `base` + sum of `coefficient * variable`, skipping zero coefficients.
std::string offsetExpression(const std::string &base, const std::vector<std::pair<std::string, int64_t>> &terms) {
  std::string code = base;
  for (const auto &[variable, coefficient] : terms)
    if (coefficient != 0)
      code += fmt::format(" + {} * {}", variable, coefficient);
  return code;
}

} // namespace

void emitEinsumStage(KernelEmitter &e, int stageIndex, KernelText &out) {
  const Stage &stage = e.plan().stages.at(static_cast<size_t>(stageIndex));
  const ir::Node &einsum = *stage.anchor;
  DType dtype = einsum.output()->dtype();
  EinsumSpace space = einsumSpace(einsum);
  size_t operands = einsum.numInputs();
  std::vector<size_t> summed;
  for (size_t axis = 0; axis < space.sizes.size(); ++axis)
    if (std::find(space.outAxes.begin(), space.outAxes.end(), axis) == space.outAxes.end())
      summed.push_back(axis);
  size_t outRank = space.outAxes.size();
  int64_t last = outRank == 0 ? 1 : space.sizes[space.outAxes.back()];
  int64_t rows = numElements(einsum.output()->shape()) / std::max<int64_t>(last, 1);
  int64_t summedPoints = 1;
  for (size_t axis : summed)
    summedPoints = checkedMul(summedPoints, space.sizes[axis], "summed index points");

  e.beginFunction(stageIndex);
  std::vector<std::string> pointers;
  for (size_t k = 0; k < operands; ++k)
    pointers.push_back(fmt::format("({} + {})", e.pointer(stage.anchorOperands[k].buffer), stage.anchorOperands[k].offset));
  std::string y = e.pointer(stage.tileBuffer), type = cType(dtype);
  std::string accumulator = isFloat(dtype) ? "double" : "uint64_t";
  std::string body = "for (int64_t r = begin; r < end; ++r) {\n  int64_t t = r;\n  (void)t;\n";
  for (size_t k = 0; k < operands; ++k)
    body += fmt::format("  int64_t base{} = 0;\n", k);
  for (size_t d = outRank > 0 ? outRank - 1 : 0; d-- > 0;) {
    size_t axis = space.outAxes[d];
    body += fmt::format("  {{\n    const int64_t coord = t % {};\n    t /= {};\n", space.sizes[axis], space.sizes[axis]);
    for (size_t k = 0; k < operands; ++k)
      if (space.operandSteps[k][axis] != 0)
        body += fmt::format("    base{} += coord * {};\n", k, space.operandSteps[k][axis]);
    body += "    (void)coord;\n  }\n";
  }
  body += fmt::format("  {} *__restrict o = {} + r * {};\n", type, y, last);
  body += fmt::format("  for (int64_t j = 0; j < {}; ++j) {{\n    {} acc = 0;\n", last, accumulator);
  std::string indent = "    ";
  for (size_t s = 0; s < summed.size(); ++s) {
    body += fmt::format("{0}for (int64_t s{1} = 0; s{1} < {2}; ++s{1})\n", indent, s, space.sizes[summed[s]]);
    indent += "  ";
  }
  std::string product;
  for (size_t k = 0; k < operands; ++k) {
    std::vector<std::pair<std::string, int64_t>> terms;
    if (outRank > 0)
      terms.push_back({"j", space.operandSteps[k][space.outAxes.back()]});
    for (size_t s = 0; s < summed.size(); ++s)
      terms.push_back({fmt::format("s{}", s), space.operandSteps[k][summed[s]]});
    product += fmt::format("{}({}){}[{}]", k == 0 ? "" : " * ", accumulator, pointers[k],
                           offsetExpression(fmt::format("base{}", k), terms));
  }
  body += fmt::format("{}acc += {};\n", indent, product);
  body += fmt::format("    o[j] = ({})acc;\n  }}\n}}", type);
  std::string fn = fmt::format("{}_s{}_einsum", e.prefix(), stageIndex);
  e.line(body);
  out.functions += fmt::format("static void {}(void *vctx, int64_t begin, int64_t end) {{\n{}}}\n\n", fn,
                               e.endFunction());
  out.body.push_back(runRows(fn, rows, last * std::max<int64_t>(summedPoints, 1)));
}

} // namespace kiln::codegen
