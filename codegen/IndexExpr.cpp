// Index expressions: interning, ranges, and the div/mod simplification rules (see IndexExpr.h).
//
// The rules, for e >= 0 and k > 0, writing e = k*Q + R where Q collects the terms whose
// coefficients k divides and R the rest (constant reduced into [0, k)):
//   - when R >= 0:        e / k = Q + R / k     and  e % k = R % k
//   - when R lies in [0, k): R / k = 0           and  R % k = R
//   - g = gcd(R's coefficients, R's constant, k): R / k = (R/g) / (k/g), R % k = g*((R/g) % (k/g))
//   - (e / a) / b = e / (a*b)
// and, when a sum holds both, c*k*(e/k) + c*(e%k) = c*e. Together they undo the div/mod that
// reshapes introduce whenever the reshape keeps the layout, which is the common case.
#include "codegen/IndexExpr.h"

#include <algorithm>
#include <numeric>

#include "core/Error.h"
#include "core/ShapeMath.h"

namespace kiln::codegen {

namespace {

int64_t clampToInt64(__int128 value) {
  if (value > static_cast<__int128>(INT64_MAX))
    return INT64_MAX;
  if (value < static_cast<__int128>(INT64_MIN))
    return INT64_MIN;
  return static_cast<int64_t>(value);
}

int64_t floorDiv(int64_t a, int64_t k) {
  int64_t q = a / k;
  return (a % k != 0 && a < 0) ? q - 1 : q;
}

/// a - k*floorDiv(a, k), in [0, k), without forming the product (which can leave int64).
int64_t floorMod(int64_t a, int64_t k) {
  int64_t r = a % k;
  return r < 0 ? r + k : r;
}

/// Coefficients and constants are strides and offsets of shapes within kiln's size limit, so
/// they stay far inside int64; composing many views could still leave it, which must be an
/// error rather than a wrong index (core/ShapeMath.h).
constexpr std::string_view kIndexArithmetic = "index arithmetic";

// Sum of two sorted term lists, dropping zero coefficients.
std::vector<std::pair<int, int64_t>> mergeTerms(const std::vector<std::pair<int, int64_t>> &a,
                                                const std::vector<std::pair<int, int64_t>> &b) {
  std::vector<std::pair<int, int64_t>> out;
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].first < b[j].first)) {
      out.push_back(a[i++]);
    } else if (i == a.size() || b[j].first < a[i].first) {
      out.push_back(b[j++]);
    } else {
      int64_t coef = checkedAdd(a[i].second, b[j].second, kIndexArithmetic);
      if (coef != 0)
        out.emplace_back(a[i].first, coef);
      ++i;
      ++j;
    }
  }
  return out;
}

Index rawAdd(const Index &a, const Index &b) {
  return Index{checkedAdd(a.constant, b.constant, kIndexArithmetic), mergeTerms(a.terms, b.terms)};
}

} // namespace

Index IndexArena::fromAtom(int id, int64_t coef) const {
  Index index;
  if (coef != 0)
    index.terms.emplace_back(id, coef);
  return index;
}

std::string IndexArena::key(const Atom &atom) const {
  switch (atom.kind) {
  case AtomKind::Var: return "v:" + atom.code;
  case AtomKind::Opaque: return "o:" + atom.code;
  case AtomKind::Div:
  case AtomKind::Mod: {
    std::string k = atom.kind == AtomKind::Div ? "d:" : "m:";
    k += std::to_string(atom.divisor) + ":" + std::to_string(atom.operand.constant);
    for (const auto &[id, coef] : atom.operand.terms)
      k += "," + std::to_string(id) + "*" + std::to_string(coef);
    return k;
  }
  }
  return "";
}

int IndexArena::intern(Atom atom) {
  std::string k = key(atom);
  auto it = ids_.find(k);
  if (it != ids_.end())
    return it->second;
  int id = static_cast<int>(atoms_.size());
  atoms_.push_back(std::move(atom));
  ids_.emplace(std::move(k), id);
  return id;
}

Index IndexArena::var(const std::string &name, int64_t extent, int level) {
  if (extent <= 1) // a dim of size 1 (or 0, where no iteration runs) contributes nothing
    return constant(0);
  Atom atom;
  atom.kind = AtomKind::Var;
  atom.code = name;
  atom.range = {0, extent - 1};
  atom.level = level;
  return fromAtom(intern(std::move(atom)));
}

Index IndexArena::opaque(const std::string &code, Range range, int level) {
  if (range.lo == range.hi)
    return constant(range.lo);
  Atom atom;
  atom.kind = AtomKind::Opaque;
  atom.code = code;
  atom.range = range;
  atom.level = level;
  return fromAtom(intern(std::move(atom)));
}

Range IndexArena::range(const Index &a) const {
  __int128 lo = a.constant, hi = a.constant;
  for (const auto &[id, coef] : a.terms) {
    const Range &r = atoms_[static_cast<size_t>(id)].range;
    __int128 x = static_cast<__int128>(coef) * r.lo, y = static_cast<__int128>(coef) * r.hi;
    lo += std::min(x, y);
    hi += std::max(x, y);
  }
  return {clampToInt64(lo), clampToInt64(hi)};
}

int IndexArena::level(const Index &a) const {
  int deepest = 0;
  for (const auto &term : a.terms)
    deepest = std::max(deepest, atoms_[static_cast<size_t>(term.first)].level);
  return deepest;
}

bool IndexArena::isAffine(const Index &a) const {
  for (const auto &term : a.terms)
    if (atoms_[static_cast<size_t>(term.first)].kind != AtomKind::Var)
      return false;
  return true;
}

int64_t IndexArena::coefficientOf(const Index &a, const std::string &varName) const {
  for (const auto &[id, coef] : a.terms) {
    const Atom &atom = atoms_[static_cast<size_t>(id)];
    if (atom.kind == AtomKind::Var && atom.code == varName)
      return coef;
  }
  return 0;
}

Index IndexArena::add(const Index &a, const Index &b) { return recombine(rawAdd(a, b)); }

Index IndexArena::scale(const Index &a, int64_t factor) {
  if (factor == 0)
    return constant(0);
  Index out{checkedMul(a.constant, factor, kIndexArithmetic), {}};
  for (const auto &[id, coef] : a.terms)
    out.terms.emplace_back(id, checkedMul(coef, factor, kIndexArithmetic));
  return out;
}

std::optional<std::pair<Index, int64_t>> IndexArena::splitMultiple(const Index &rest, int64_t k) const {
  // The term with the largest coefficient c dividing k, if the others stay in [0, c).
  std::optional<std::pair<Index, int64_t>> best;
  for (const auto &[id, coef] : rest.terms) {
    if (coef <= 1 || k % coef != 0 || (best && best->second >= coef))
      continue;
    Index others = rest;
    others.terms.erase(std::remove_if(others.terms.begin(), others.terms.end(),
                                      [id = id](const auto &term) { return term.first == id; }),
                       others.terms.end());
    Range r = range(others);
    if (r.lo >= 0 && r.hi < coef)
      best = std::make_pair(fromAtom(id), coef);
  }
  return best;
}

Index IndexArena::div(const Index &a, int64_t k) {
  if (k <= 0)
    return constant(0); // a zero-size dim: the code using it never runs
  if (k == 1)
    return a;
  Range r = range(a);
  if (r.lo >= 0 && r.hi < k)
    return constant(0);
  if (a.isConstant())
    return constant(floorDiv(a.constant, k));
  // e = k*Q + R with R's constant in [0, k).
  Index quotient{floorDiv(a.constant, k), {}}, rest{floorMod(a.constant, k), {}};
  for (const auto &[id, coef] : a.terms) {
    if (coef % k == 0)
      quotient.terms.emplace_back(id, coef / k);
    else
      rest.terms.emplace_back(id, coef);
  }
  if (range(rest).lo < 0) { // cannot split safely; `a` itself is never negative
    Atom atom;
    atom.kind = AtomKind::Div;
    atom.operand = a;
    atom.divisor = k;
    atom.range = {floorDiv(r.lo, k), floorDiv(r.hi, k)};
    atom.level = level(a);
    return fromAtom(intern(std::move(atom)));
  }
  // (c*x + S) / (c*m) = x / m when 0 <= S < c: a row index times a row length, over a block
  // of whole rows.
  if (auto split = splitMultiple(rest, k)) {
    auto [x, c] = *split;
    return recombine(rawAdd(quotient, div(x, k / c)));
  }
  // Divide R and k by their common factor.
  int64_t g = std::gcd(k, rest.constant);
  for (const auto &term : rest.terms)
    g = std::gcd(g, term.second);
  if (g > 1) {
    rest.constant /= g;
    for (auto &term : rest.terms)
      term.second /= g;
    k /= g;
  }
  Range rr = range(rest);
  Index restQuotient;
  if (rr.hi < k) {
    restQuotient = constant(0);
  } else if (rest.constant == 0 && rest.terms.size() == 1 && rest.terms[0].second == 1 &&
             atoms_[static_cast<size_t>(rest.terms[0].first)].kind == AtomKind::Div) {
    // (e / a) / k = e / (a*k)
    const Atom &inner = atoms_[static_cast<size_t>(rest.terms[0].first)];
    Index e = inner.operand;
    int64_t divisor = inner.divisor;
    if (divisor <= INT64_MAX / k)
      return rawAdd(quotient, div(e, divisor * k));
    Atom atom;
    atom.kind = AtomKind::Div;
    atom.operand = rest;
    atom.divisor = k;
    atom.range = {rr.lo / k, rr.hi / k};
    atom.level = level(rest);
    restQuotient = fromAtom(intern(std::move(atom)));
  } else {
    Atom atom;
    atom.kind = AtomKind::Div;
    atom.operand = rest;
    atom.divisor = k;
    atom.range = {rr.lo / k, rr.hi / k};
    atom.level = level(rest);
    restQuotient = fromAtom(intern(std::move(atom)));
  }
  return recombine(rawAdd(quotient, restQuotient));
}

Index IndexArena::mod(const Index &a, int64_t k) {
  if (k <= 1)
    return constant(0);
  Range r = range(a);
  if (r.lo >= 0 && r.hi < k)
    return a;
  Index rest{floorMod(a.constant, k), {}};
  for (const auto &[id, coef] : a.terms)
    if (coef % k != 0)
      rest.terms.emplace_back(id, coef);
  if (range(rest).lo < 0) {
    Atom atom;
    atom.kind = AtomKind::Mod;
    atom.operand = a;
    atom.divisor = k;
    atom.range = {0, k - 1};
    atom.level = level(a);
    return fromAtom(intern(std::move(atom)));
  }
  // (c*x + S) % (c*m) = c*(x % m) + S when 0 <= S < c.
  if (auto split = splitMultiple(rest, k)) {
    auto [x, c] = *split;
    Index remainder = rest;
    remainder.terms.erase(std::remove_if(remainder.terms.begin(), remainder.terms.end(),
                                         [&](const auto &term) { return term.second == c && fromAtom(term.first) == x; }),
                          remainder.terms.end());
    return add(scale(mod(x, k / c), c), remainder);
  }
  int64_t g = std::gcd(k, rest.constant);
  for (const auto &term : rest.terms)
    g = std::gcd(g, term.second);
  if (g > 1) {
    rest.constant /= g;
    for (auto &term : rest.terms)
      term.second /= g;
    return scale(mod(rest, k / g), g);
  }
  Range rr = range(rest);
  if (rr.hi < k)
    return rest;
  Atom atom;
  atom.kind = AtomKind::Mod;
  atom.operand = rest;
  atom.divisor = k;
  atom.range = {0, std::min(k - 1, rr.hi)};
  atom.level = level(rest);
  return fromAtom(intern(std::move(atom)));
}

Index IndexArena::recombine(Index a) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (const auto &[modId, c] : a.terms) {
      const Atom &modAtom = atoms_[static_cast<size_t>(modId)];
      if (modAtom.kind != AtomKind::Mod)
        continue;
      Index e = modAtom.operand;
      int64_t k = modAtom.divisor;
      Index quotient = div(e, k);
      if (quotient.constant != 0 || quotient.terms.size() != 1 || quotient.terms[0].second != 1)
        continue;
      int quotientId = quotient.terms[0].first;
      auto it = std::find_if(a.terms.begin(), a.terms.end(),
                             [&](const auto &term) { return term.first == quotientId; });
      if (it == a.terms.end() || it->second % k != 0 || it->second / k != c) // it->second == c*k, without the product
        continue;
      // c*k*(e/k) + c*(e%k) = c*e
      Index without = a;
      int64_t coef = c;
      without.terms.erase(std::remove_if(without.terms.begin(), without.terms.end(),
                                         [&](const auto &term) {
                                           return term.first == modId || term.first == quotientId;
                                         }),
                          without.terms.end());
      a = rawAdd(without, scale(e, coef));
      changed = true;
      break;
    }
  }
  return a;
}

std::string IndexArena::code(const Index &a) const {
  std::string out;
  for (const auto &[id, coef] : a.terms) {
    const Atom &atom = atoms_[static_cast<size_t>(id)];
    std::string atomCode;
    switch (atom.kind) {
    case AtomKind::Var: atomCode = atom.code; break;
    case AtomKind::Opaque: atomCode = "(" + atom.code + ")"; break;
    case AtomKind::Div: atomCode = "(" + code(atom.operand) + " / " + std::to_string(atom.divisor) + ")"; break;
    case AtomKind::Mod: atomCode = "(" + code(atom.operand) + " % " + std::to_string(atom.divisor) + ")"; break;
    }
    uint64_t magnitude = coef < 0 ? 0 - static_cast<uint64_t>(coef) : static_cast<uint64_t>(coef); // also INT64_MIN
    if (out.empty())
      out = coef < 0 ? "-" : "";
    else
      out += coef < 0 ? " - " : " + ";
    out += magnitude == 1 ? atomCode : atomCode + " * " + std::to_string(magnitude);
  }
  if (out.empty())
    return std::to_string(a.constant);
  if (a.constant != 0)
    out += (a.constant < 0 ? " - " : " + ") +
           std::to_string(a.constant < 0 ? 0 - static_cast<uint64_t>(a.constant) : static_cast<uint64_t>(a.constant));
  return a.terms.size() == 1 && a.constant == 0 ? out : "(" + out + ")";
}

Index flatIndex(IndexArena &arena, const std::vector<Index> &coords, const std::vector<int64_t> &shape) {
  Index flat = IndexArena::constant(0);
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    flat = arena.add(flat, arena.scale(coords.at(d), stride));
    stride = checkedMul(stride, shape[d], kIndexArithmetic);
  }
  return flat;
}

std::vector<Index> unflattenIndex(IndexArena &arena, const Index &flat, const std::vector<int64_t> &shape) {
  std::vector<Index> coords(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    Index quotient = arena.div(flat, stride);
    coords[d] = d == 0 ? quotient : arena.mod(quotient, shape[d]);
    stride = checkedMul(stride, shape[d], kIndexArithmetic);
  }
  return coords;
}

} // namespace kiln::codegen
