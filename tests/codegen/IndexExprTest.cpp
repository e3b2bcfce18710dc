// Index expressions: the simplification rules give the expected forms, and every simplified
// expression equals the plain arithmetic at every point of its domain (checked by brute force
// on random reshape/permute chains).
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "codegen/IndexExpr.h"

namespace kiln::codegen {
namespace {

// Evaluates `index` with loop variables bound by name (test-side, independent of code()).
int64_t evaluate(const IndexArena &arena, const Index &index, const std::map<std::string, int64_t> &vars) {
  int64_t value = index.constant;
  for (const auto &[id, coef] : index.terms) {
    const IndexArena::Atom &atom = arena.atom(id);
    int64_t x = 0;
    switch (atom.kind) {
    case IndexArena::AtomKind::Var: x = vars.at(atom.code); break;
    case IndexArena::AtomKind::Div: x = evaluate(arena, atom.operand, vars) / atom.divisor; break;
    case IndexArena::AtomKind::Mod: x = evaluate(arena, atom.operand, vars) % atom.divisor; break;
    case IndexArena::AtomKind::Opaque: ADD_FAILURE() << "unexpected opaque atom"; break;
    }
    value += coef * x;
  }
  return value;
}

TEST(CodegenIndexExpr, DivModOfRowMajorIndexSimplify) {
  IndexArena arena;
  Index i0 = arena.var("i0", 5, 1), i1 = arena.var("i1", 12, 2);
  Index flat = arena.add(arena.scale(i0, 12), i1);
  EXPECT_EQ(arena.div(flat, 12), i0);
  EXPECT_EQ(arena.mod(flat, 12), i1);
  EXPECT_EQ(arena.code(arena.div(flat, 4)), "(i0 * 3 + (i1 / 4))");
  EXPECT_EQ(arena.code(arena.div(arena.scale(i1, 2), 4)), "(i1 / 2)");
  Index r = arena.var("r", 8, 1), j = arena.var("j", 15, 2);
  EXPECT_EQ(arena.div(arena.add(arena.scale(r, 15), j), 60), arena.div(r, 4));
}

TEST(CodegenIndexExpr, DivModPairsRecombine) {
  IndexArena arena;
  Index i = arena.var("i", 100, 1);
  Index split = arena.add(arena.scale(arena.div(i, 4), 4), arena.mod(i, 4));
  EXPECT_EQ(split, i);
  Index nested = arena.add(arena.add(arena.scale(arena.div(i, 20), 20), arena.scale(arena.mod(arena.div(i, 4), 5), 4)),
                           arena.mod(i, 4));
  EXPECT_EQ(nested, i);
}

TEST(CodegenIndexExpr, RangesDropTrivialDivisions) {
  IndexArena arena;
  Index i = arena.var("i", 7, 1);
  EXPECT_EQ(arena.div(i, 7), IndexArena::constant(0));
  EXPECT_EQ(arena.mod(i, 7), i);
  EXPECT_EQ(arena.var("one", 1, 1), IndexArena::constant(0));
  Range range = arena.range(arena.addConstant(arena.scale(i, -3), 20));
  EXPECT_EQ(range.lo, 2);
  EXPECT_EQ(range.hi, 20);
}

// Reshaping a permuted tensor: the simplified address must equal the arithmetic of
// "flatten the output index, unflatten into the input shape, apply the permutation".
TEST(CodegenIndexExpr, RandomReshapeChainsEqualBruteForce) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<int64_t> dims;
    int rank = 1 + static_cast<int>(rng() % 4);
    for (int d = 0; d < rank; ++d)
      dims.push_back(1 + static_cast<int64_t>(rng() % 4));
    int64_t total = 1;
    for (int64_t d : dims)
      total *= d;
    // The output shape: the same elements in 1 or 2 dims.
    std::vector<int64_t> outShape{total};
    for (int64_t f = 2; f < total; ++f)
      if (total % f == 0 && rng() % 2) {
        outShape = {total / f, f};
        break;
      }
    std::vector<int64_t> perm(dims.size());
    for (size_t d = 0; d < perm.size(); ++d)
      perm[d] = static_cast<int64_t>(d);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<int64_t> permuted;
    for (int64_t axis : perm)
      permuted.push_back(dims[static_cast<size_t>(axis)]);

    IndexArena arena;
    std::vector<Index> coords;
    for (size_t d = 0; d < outShape.size(); ++d)
      coords.push_back(arena.var("v" + std::to_string(d), outShape[d], static_cast<int>(d) + 1));
    // output -> permuted shape (reshape) -> input coords (permute) -> input address
    std::vector<Index> p = unflattenIndex(arena, flatIndex(arena, coords, outShape), permuted);
    std::vector<Index> in(dims.size());
    for (size_t d = 0; d < perm.size(); ++d)
      in[static_cast<size_t>(perm[d])] = p[d];
    Index address = flatIndex(arena, in, dims);

    for (int64_t flat = 0; flat < total; ++flat) {
      std::map<std::string, int64_t> vars;
      int64_t rest = flat;
      for (size_t d = outShape.size(); d-- > 0;) {
        vars["v" + std::to_string(d)] = rest % outShape[d];
        rest /= outShape[d];
      }
      // Brute force: unflatten `flat` in the permuted shape, permute back, flatten in dims.
      std::vector<int64_t> pc(permuted.size()), ic(dims.size());
      rest = flat;
      for (size_t d = permuted.size(); d-- > 0;) {
        pc[d] = rest % permuted[d];
        rest /= permuted[d];
      }
      for (size_t d = 0; d < perm.size(); ++d)
        ic[static_cast<size_t>(perm[d])] = pc[d];
      int64_t want = 0;
      for (size_t d = 0; d < dims.size(); ++d)
        want = want * dims[d] + ic[d];
      ASSERT_EQ(evaluate(arena, address, vars), want) << "trial " << trial << " flat " << flat << ": "
                                                      << arena.code(address);
    }
  }
}

} // namespace
} // namespace kiln::codegen
