#include "core/SymbolicDim.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "core/Error.h"
#include "core/ShapeMath.h"

namespace kiln {

namespace {

/// A monomial: its symbol names, sorted, with repeats for powers ({} is the constant term).
using Monomial = std::vector<std::string>;
/// A canonical polynomial: monomial -> non-zero coefficient.
using Poly = std::map<Monomial, int64_t>;

std::string monomialToString(const Monomial &monomial, int64_t coefficient) {
  std::string out = coefficient == 1 && !monomial.empty() ? "" : std::to_string(coefficient);
  for (const std::string &name : monomial)
    out += (out.empty() ? "" : "*") + name;
  return out;
}

/// Symbol terms in map order, then the constant: "N+M" sorts "M+N", "N+1".
std::string polyToString(const Poly &poly) {
  std::string out;
  for (auto &[monomial, coefficient] : poly)
    if (!monomial.empty())
      out += (out.empty() ? "" : "+") + monomialToString(monomial, coefficient);
  auto constant = poly.find(Monomial{});
  if (constant != poly.end())
    out += (out.empty() ? "" : "+") + std::to_string(constant->second);
  return out.empty() ? "0" : out;
}

/// The process-wide table of expressions; an expression's id is its index.
class ExprTable {
public:
  static ExprTable &instance() {
    static ExprTable table;
    return table;
  }

  /// The dim for `poly`: a constant dim when it has no symbol, else its interned id.
  int64_t intern(const Poly &poly) {
    if (poly.empty())
      return 0;
    if (poly.size() == 1 && poly.begin()->first.empty())
      return poly.begin()->second;
    std::string key = polyToString(poly);
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = ids_.find(key);
    if (found != ids_.end())
      return kSymbolicDimBase - found->second;
    int64_t id = static_cast<int64_t>(exprs_.size());
    exprs_.push_back(poly);
    ids_.emplace(std::move(key), id);
    return kSymbolicDimBase - id;
  }

  /// The polynomial of any dim: a constant's, or the interned one.
  Poly lookup(int64_t dim) {
    if (!isSymbolicDim(dim))
      return dim == 0 ? Poly{} : Poly{{Monomial{}, dim}};
    std::lock_guard<std::mutex> lock(mutex_);
    size_t id = static_cast<size_t>(kSymbolicDimBase - dim);
    if (id >= exprs_.size())
      fail("symbolic dim id {} is unknown to this process", id);
    return exprs_[id];
  }

  /// The interned polynomial of a symbolic dim; nullopt for an id never interned.
  std::optional<Poly> find(int64_t dim) {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t id = static_cast<size_t>(kSymbolicDimBase - dim);
    return id < exprs_.size() ? std::optional<Poly>(exprs_[id]) : std::nullopt;
  }

private:
  std::mutex mutex_;
  std::vector<Poly> exprs_;
  std::unordered_map<std::string, int64_t> ids_;
};

void addTerm(Poly &poly, const Monomial &monomial, int64_t coefficient, std::string_view what) {
  int64_t sum = checkedAdd(poly[monomial], coefficient, what);
  if (sum == 0)
    poly.erase(monomial);
  else
    poly[monomial] = sum;
}

} // namespace

bool isStaticShape(const Shape &shape) {
  return std::none_of(shape.begin(), shape.end(), [](int64_t d) { return isSymbolicDim(d); });
}

bool isStaticType(const TensorType &type) { return isStaticShape(type.shape); }

bool shapeFits(const Shape &shape, const Shape &declared) {
  if (shape.size() != declared.size())
    return false;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!isSymbolicDim(declared[d]) && shape[d] != declared[d])
      return false;
  return true;
}

bool isInternedSymbolicDim(int64_t dim) {
  return isSymbolicDim(dim) && ExprTable::instance().find(dim).has_value();
}

bool isValidSymbolName(std::string_view name) {
  if (name.empty() || parseDType(name))
    return false;
  auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (!alpha(name[0]))
    return false;
  return std::all_of(name.begin(), name.end(), [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

int64_t symbolDim(std::string_view name) {
  if (!isValidSymbolName(name))
    fail("'{}' cannot name a symbolic dim: use an identifier ([A-Za-z_][A-Za-z0-9_]*) that is "
         "not a dtype",
         name);
  return ExprTable::instance().intern(Poly{{Monomial{std::string(name)}, 1}});
}

std::string dimToString(int64_t dim) {
  std::optional<Poly> poly = isSymbolicDim(dim) ? ExprTable::instance().find(dim) : std::nullopt;
  return poly ? polyToString(*poly) : std::to_string(dim);
}

int64_t dimMul(int64_t a, int64_t b, std::string_view what) {
  if (!isSymbolicDim(a) && !isSymbolicDim(b))
    return checkedMul(a, b, what);
  Poly pa = ExprTable::instance().lookup(a), pb = ExprTable::instance().lookup(b), product;
  for (auto &[ma, ca] : pa)
    for (auto &[mb, cb] : pb) {
      Monomial m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end());
      addTerm(product, m, checkedMul(ca, cb, what), what);
    }
  return ExprTable::instance().intern(product);
}

int64_t dimAdd(int64_t a, int64_t b, std::string_view what) {
  if (!isSymbolicDim(a) && !isSymbolicDim(b))
    return checkedAdd(a, b, what);
  Poly sum = ExprTable::instance().lookup(a);
  for (auto &[m, c] : ExprTable::instance().lookup(b))
    addTerm(sum, m, c, what);
  return ExprTable::instance().intern(sum);
}

std::optional<int64_t> dimDivExact(int64_t a, int64_t b) {
  if (b == 0)
    return std::nullopt;
  if (!isSymbolicDim(a) && !isSymbolicDim(b))
    return a % b == 0 ? std::optional<int64_t>(a / b) : std::nullopt;
  Poly pa = ExprTable::instance().lookup(a), pb = ExprTable::instance().lookup(b);
  if (pb.size() != 1)
    return a == b ? std::optional<int64_t>(1) : std::nullopt;
  const auto &[divisor, coefficient] = *pb.begin();
  Poly quotient;
  for (auto &[m, c] : pa) {
    if (c % coefficient != 0)
      return std::nullopt;
    // Remove the divisor's names from m (both sorted), one occurrence each.
    Monomial rest;
    size_t j = 0;
    for (const std::string &name : m) {
      if (j < divisor.size() && divisor[j] == name)
        ++j;
      else
        rest.push_back(name);
    }
    if (j != divisor.size())
      return std::nullopt;
    quotient[rest] = c / coefficient;
  }
  return ExprTable::instance().intern(quotient);
}

int64_t dimProduct(const Shape &shape, size_t from, size_t to, std::string_view what) {
  Shape constants;
  int64_t symbolic = 1;
  for (size_t d = from; d < to; ++d) {
    if (isSymbolicDim(shape[d]))
      symbolic = dimMul(symbolic, shape[d], what);
    else
      constants.push_back(shape[d]);
  }
  return dimMul(elementCount(constants, what), symbolic, what);
}

std::vector<std::string> dimSymbols(int64_t dim) {
  std::vector<std::string> names;
  for (auto &[m, c] : ExprTable::instance().lookup(dim))
    names.insert(names.end(), m.begin(), m.end());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::optional<std::string> dimSymbolName(int64_t dim) {
  if (!isSymbolicDim(dim))
    return std::nullopt;
  Poly poly = ExprTable::instance().lookup(dim);
  if (poly.size() != 1 || poly.begin()->first.size() != 1 || poly.begin()->second != 1)
    return std::nullopt;
  return poly.begin()->first.front();
}

int64_t evaluateDim(int64_t dim, const DimBindings &bindings, std::string_view what) {
  if (!isSymbolicDim(dim))
    return dim;
  int64_t total = 0;
  for (auto &[m, c] : ExprTable::instance().lookup(dim)) {
    int64_t term = c;
    for (const std::string &name : m) {
      auto bound = bindings.find(name);
      if (bound == bindings.end())
        fail("{}: symbol {} (in dim {}) has no extent; bind it (e.g. --dim {}=8)", what, name,
             dimToString(dim), name);
      term = checkedMul(term, bound->second, what);
    }
    total = checkedAdd(total, term, what);
  }
  if (total < 0 || total > kMaxElements)
    fail("{}: dim {} evaluates to {}, outside [0, 2^48]", what, dimToString(dim), total);
  return total;
}

Shape evaluateShape(const Shape &shape, const DimBindings &bindings, std::string_view what) {
  Shape out;
  out.reserve(shape.size());
  for (int64_t dim : shape)
    out.push_back(evaluateDim(dim, bindings, what));
  return out;
}

int64_t requireStaticDim(const Shape &shape, size_t axis, std::string_view what) {
  if (isSymbolicDim(shape.at(axis)))
    fail("{} needs a static dim {} but the shape {} has the symbolic {} there; bind the symbol "
         "first (kiln-run --dim)",
         what, axis, shapeToString(shape), dimToString(shape[axis]));
  return shape[axis];
}

void requireStaticShape(const Shape &shape, std::string_view what) {
  for (size_t d = 0; d < shape.size(); ++d)
    requireStaticDim(shape, d, what);
}

} // namespace kiln
