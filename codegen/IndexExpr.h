#pragma once
// Quasi-affine index expressions: the integer arithmetic that turns a loop nest's variables
// into element coordinates and addresses, with movement ops (broadcast, permute, reshape,
// slice) composed symbolically instead of copied.
//
// An Index is `constant + sum(coef * atom)`. An atom is a loop variable, `e / k` or `e % k`
// of another Index (e is always a coordinate or flat index, so never negative, and C++'s
// truncating division is floor division), or an opaque integer the emitter computed (a
// gather index, a reflected pad coordinate) with a known range. Atoms are interned in an
// IndexArena, so equal atoms have equal ids and Indexes compare structurally.
//
// Simplification is what makes views free: with i1 < 12,
//   (12*i0 + i1) / 12 -> i0,  (12*i0 + i1) % 12 -> i1,  (15*r + i1) / 60 -> r / 4,
//   and  4*(e/4) + e%4 -> e,
// so reshaping a contiguous value and reading it back yields the plain flat index. Every rule
// only needs value ranges, which the arena derives from loop extents; a range that is too
// wide merely leaves an expression unsimplified, never wrong. Coefficients, constants and
// strides are checked (core/ShapeMath.h): one leaving int64 is a kiln::Error, never a wrong index.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::codegen {

struct Index {
  int64_t constant = 0;
  /// (atom id, coefficient), sorted by atom id, no zero coefficients.
  std::vector<std::pair<int, int64_t>> terms;

  bool isConstant() const { return terms.empty(); }
  bool operator==(const Index &other) const { return constant == other.constant && terms == other.terms; }
  bool operator!=(const Index &other) const { return !(*this == other); }
};

/// Inclusive value range.
struct Range {
  int64_t lo = 0, hi = 0;
};

class IndexArena {
public:
  enum class AtomKind { Var, Div, Mod, Opaque };
  struct Atom {
    AtomKind kind = AtomKind::Var;
    std::string code;  // Var and Opaque: the C++ name or expression
    Index operand;     // Div, Mod
    int64_t divisor = 1;
    Range range;
    int level = 0;     // the loop scope where the atom's value is known (see Emitter)
  };

  /// A loop variable with values in [0, extent), defined at scope `level`.
  Index var(const std::string &name, int64_t extent, int level);
  /// An integer the emitter computed (named `code`) whose value lies in `range`.
  Index opaque(const std::string &code, Range range, int level);

  static Index constant(int64_t value) { return Index{value, {}}; }
  Index add(const Index &a, const Index &b);
  Index scale(const Index &a, int64_t factor);
  Index addConstant(const Index &a, int64_t value) { return add(a, constant(value)); }
  /// floor(a / k) and a mod k for a >= 0 and k > 0, simplified.
  Index div(const Index &a, int64_t k);
  Index mod(const Index &a, int64_t k);

  Range range(const Index &a) const;
  /// The deepest scope level of any atom in `a` (0 for a constant).
  int level(const Index &a) const;
  /// Whether `a` uses only loop variables (no div, mod or opaque atoms): a strided access.
  bool isAffine(const Index &a) const;
  /// The coefficient of loop variable `name` in `a` (0 if absent); meaningful for affine `a`.
  int64_t coefficientOf(const Index &a, const std::string &varName) const;

  /// C++ source for `a` (an int64_t expression).
  std::string code(const Index &a) const;

  const Atom &atom(int id) const { return atoms_.at(static_cast<size_t>(id)); }

private:
  int intern(Atom atom);
  std::string key(const Atom &atom) const;
  /// Merges div/mod pairs: c*k*(e/k) + c*(e%k) -> c*e, until none is left.
  Index recombine(Index a);
  Index fromAtom(int id, int64_t coef = 1) const;
  /// For `rest` = c*x + S with c dividing k and 0 <= S < c: (x, c).
  std::optional<std::pair<Index, int64_t>> splitMultiple(const Index &rest, int64_t k) const;

  std::vector<Atom> atoms_;
  std::map<std::string, int> ids_;
};

/// Row-major flat index of `coords` in `shape` (unsimplified sum of coord * stride).
Index flatIndex(IndexArena &arena, const std::vector<Index> &coords, const std::vector<int64_t> &shape);
/// The coordinates in `shape` of flat index `flat`.
std::vector<Index> unflattenIndex(IndexArena &arena, const Index &flat, const std::vector<int64_t> &shape);

} // namespace kiln::codegen
