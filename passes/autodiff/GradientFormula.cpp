// A recursive-descent reader of gradient formulas (GradientFormula.h) that builds each operator
// as it reads it; a formula is a few dozen characters, read once per differentiated node.
#include "passes/autodiff/GradientFormula.h"

#include <cctype>
#include <cstdlib>
#include <string>

#include "core/Error.h"
#include "ir/ElementwiseOps.h"
#include "ir/ops/DecomposeHelpers.h"

namespace kiln::passes::autodiff {

using namespace ir;

namespace {

/// A value read so far: an op's result, or a number not yet built. Numbers become constants
/// only when the operator that uses them is built, just before it, as the hand-written rules
/// made them (`1 - y * y` builds y * y, then 1, then the subtraction).
struct Operand {
  Value *value = nullptr;
  double number = 0;
};

class FormulaBuilder {
public:
  FormulaBuilder(Builder &b, OpKind op, std::string_view formula, const FormulaValues &values)
      : b_(b), op_(op), text_(formula), values_(values) {}

  Value *build() {
    Operand result = formula();
    skipSpaces();
    if (pos_ != text_.size())
      error("unexpected '{}'", text_[pos_]);
    return materialize(result);
  }

private:
  Value *materialize(const Operand &operand) {
    return operand.value ? operand.value : ops::constantLike(b_, values_.x, operand.number);
  }

  Operand binary(OpKind kind, const Operand &lhs, const Operand &rhs) {
    Value *l = materialize(lhs);
    Value *r = materialize(rhs);
    return {ops::binary(b_, kind, l, r)};
  }

  Operand formula() {
    Operand lhs = sum();
    static constexpr std::pair<std::string_view, OpKind> kComparisons[] = {
        {">=", OpKind::Ge}, {"<=", OpKind::Le}, {"==", OpKind::Eq},
        {"!=", OpKind::Ne}, {">", OpKind::Gt},  {"<", OpKind::Lt}};
    for (const auto &[spelling, kind] : kComparisons)
      if (accept(spelling)) {
        Operand rhs = sum();
        return binary(kind, lhs, rhs);
      }
    return lhs;
  }

  Operand sum() {
    Operand value = product();
    while (true) {
      OpKind kind;
      if (accept("+"))
        kind = OpKind::Add;
      else if (accept("-"))
        kind = OpKind::Sub;
      else
        return value;
      Operand rhs = product();
      value = binary(kind, value, rhs);
    }
  }

  Operand product() {
    Operand value = factor();
    while (true) {
      OpKind kind;
      if (accept("*"))
        kind = OpKind::Mul;
      else if (accept("/"))
        kind = OpKind::Div;
      else
        return value;
      Operand rhs = factor();
      value = binary(kind, value, rhs);
    }
  }

  Operand factor() {
    skipSpaces();
    if (accept("-")) {
      skipSpaces();
      if (startsNumber())
        return {nullptr, -number()};
      Value *operand = materialize(factor());
      return {ops::unary(b_, OpKind::Neg, operand)};
    }
    if (startsNumber())
      return {nullptr, number()};
    if (accept("(")) {
      Operand value = formula();
      expect(")");
      return value;
    }
    std::string name = identifier();
    if (name == "g")
      return {values_.g};
    if (name == "x")
      return {values_.x};
    if (name == "y")
      return {values_.y};
    expect("(");
    Operand argumentOperand = formula();
    expect(")");
    if (name == "cast")
      return {b_.create(OpKind::Cast, {materialize(argumentOperand)}, {{"to", values_.x->dtype()}})};
    std::optional<OpKind> kind = parseOpName(name);
    if (!kind || !unaryOpRow(*kind))
      error("'{}' is neither cast nor a unary op of ir/ElementwiseOps.def", name);
    return {ops::unary(b_, *kind, materialize(argumentOperand))};
  }

  bool startsNumber() const { return pos_ < text_.size() && (std::isdigit(text_[pos_]) || text_[pos_] == '.'); }

  double number() {
    std::string rest(text_.substr(pos_));
    char *end = nullptr;
    double value = std::strtod(rest.c_str(), &end);
    if (end == rest.c_str())
      error("expected a number");
    pos_ += static_cast<size_t>(end - rest.c_str());
    return value;
  }

  std::string identifier() {
    skipSpaces();
    size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(text_[pos_]) || text_[pos_] == '_'))
      ++pos_;
    if (pos_ == start)
      error("expected a name, a number or '('");
    return std::string(text_.substr(start, pos_ - start));
  }

  void skipSpaces() {
    while (pos_ < text_.size() && text_[pos_] == ' ')
      ++pos_;
  }

  bool accept(std::string_view token) {
    skipSpaces();
    if (text_.substr(pos_, token.size()) != token)
      return false;
    pos_ += token.size();
    return true;
  }

  void expect(std::string_view token) {
    if (!accept(token))
      error("expected '{}'", token);
  }

  template <typename... Args> [[noreturn]] void error(fmt::format_string<Args...> what, Args &&...args) const {
    fail("autodiff: the gradient formula of {} \"{}\" at column {}: {}", opName(op_), text_, pos_ + 1,
         fmt::format(what, std::forward<Args>(args)...));
  }

  Builder &b_;
  OpKind op_;
  std::string_view text_;
  FormulaValues values_;
  size_t pos_ = 0;
};

} // namespace

Value *buildGradientFormula(Builder &b, OpKind op, std::string_view formula, const FormulaValues &values) {
  return FormulaBuilder(b, op, formula, values).build();
}

} // namespace kiln::passes::autodiff
