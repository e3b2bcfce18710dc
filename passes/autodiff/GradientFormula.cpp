// A recursive-descent reader of gradient formulas (GradientFormula.h) that builds each operator
// as it reads it; a gradient is a few dozen characters, read once per differentiated node.
#include "passes/autodiff/GradientFormula.h"

#include <cctype>
#include <cstdlib>
#include <map>
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
  FormulaBuilder(Builder &b, OpKind op, std::string_view text, const FormulaValues &values)
      : b_(b), op_(op), text_(text), values_(values) {
    const char *names[] = {"x"};
    const char *binaryNames[] = {"a", "b"};
    bool unary = values.operands.size() == 1;
    for (size_t i = 0; i < values.operands.size(); ++i)
      names_[unary ? names[0] : binaryNames[i]] = values.operands[i];
    names_["g"] = values.g;
    names_["y"] = values.y;
  }

  std::vector<Value *> build() {
    while (startsDefinition()) {
      std::string name = identifier();
      expect("=");
      if (names_.count(name))
        error("'{}' is already defined", name);
      names_[name] = materialize(formula());
      expect(";");
    }
    std::vector<Value *> results = {materialize(formula())};
    while (accept(";"))
      results.push_back(materialize(formula()));
    skipSpaces();
    if (pos_ != text_.size())
      error("unexpected '{}'", text_[pos_]);
    if (results.size() != values_.operands.size())
      error("{} results for {} operands", results.size(), values_.operands.size());
    return results;
  }

private:
  Value *materialize(const Operand &operand) {
    return operand.value ? operand.value : ops::constantLike(b_, values_.operands[0], operand.number);
  }

  Operand binary(OpKind kind, const Operand &lhs, const Operand &rhs) {
    Value *l = materialize(lhs);
    Value *r = materialize(rhs);
    return {ops::binary(b_, kind, l, r)};
  }

  /// A name followed by a single '=': a definition.
  bool startsDefinition() {
    size_t start = pos_;
    skipSpaces();
    bool named = pos_ < text_.size() && std::isalpha(static_cast<unsigned char>(text_[pos_]));
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
      ++pos_;
    skipSpaces();
    bool definition = named && text_.substr(pos_, 1) == "=" && text_.substr(pos_, 2) != "==";
    pos_ = start;
    return definition;
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
    if (!accept("(")) {
      auto it = names_.find(name);
      if (it == names_.end())
        error("'{}' is not a name of this gradient", name);
      return {it->second};
    }
    std::vector<Value *> arguments = {materialize(formula())};
    while (accept(","))
      arguments.push_back(materialize(formula()));
    expect(")");
    return call(name, arguments);
  }

  Operand call(const std::string &name, const std::vector<Value *> &arguments) {
    auto arity = [&](size_t count) {
      if (arguments.size() != count)
        error("{} takes {} arguments, got {}", name, count, arguments.size());
    };
    if (name == "cast") {
      arity(1);
      return {b_.create(OpKind::Cast, {arguments[0]}, {{"to", values_.operands[0]->dtype()}})};
    }
    if (name == "where") {
      arity(3);
      return {ops::select(b_, arguments[0], arguments[1], arguments[2])};
    }
    std::optional<OpKind> kind = parseOpName(name);
    if (kind && unaryOpRow(*kind)) {
      arity(1);
      return {ops::unary(b_, *kind, arguments[0])};
    }
    if (kind && binaryOpRow(*kind)) {
      arity(2);
      return {ops::binary(b_, *kind, arguments[0], arguments[1])};
    }
    error("'{}' is neither cast, where nor an op of ir/ElementwiseOps.def", name);
  }

  bool startsNumber() const {
    return pos_ < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '.');
  }

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
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
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
  std::map<std::string, Value *> names_;
  size_t pos_ = 0;
};

} // namespace

std::vector<Value *> buildGradientFormula(Builder &b, OpKind op, std::string_view gradient,
                                          const FormulaValues &values) {
  return FormulaBuilder(b, op, gradient, values).build();
}

} // namespace kiln::passes::autodiff
