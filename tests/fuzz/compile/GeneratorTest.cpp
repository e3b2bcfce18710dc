// The generator's promises: a seed gives one graph, every op codegen lowers is in its table and
// turns up in the first seeds, and input names round-trip to domains whose values stay in range.
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "core/Error.h"
#include "ir/Printer.h"
#include "tests/fuzz/compile/GraphGenerator.h"
#include "tests/fuzz/compile/InputDomains.h"

namespace kiln::fuzz {
namespace {

TEST(FuzzGenerator, SameSeedSameGraph) {
  for (uint64_t seed : {0u, 1u, 77u, 1234u}) {
    std::string first = ir::printGraph(*generateCase(seed).graph);
    EXPECT_EQ(ir::printGraph(*generateCase(seed).graph), first) << "seed " << seed;
  }
  EXPECT_NE(ir::printGraph(*generateCase(5).graph), ir::printGraph(*generateCase(6).graph));
}

TEST(FuzzGenerator, TableHoldsEveryLoweredOp) {
  std::vector<ir::OpKind> table = generatorOps();
  std::set<ir::OpKind> known(table.begin(), table.end());
  for (ir::OpKind op : loweredOps())
    EXPECT_TRUE(known.count(op)) << ir::opName(op) << " is lowered by codegen but the generator never builds it";
}

TEST(FuzzGenerator, FirstSeedsUseEveryLoweredOp) {
  // Seeds pick their focus op by a hash, so a few hundred seeds reach every op of the table.
  std::set<ir::OpKind> seen;
  for (uint64_t seed = 0; seed < 1500; ++seed) {
    GeneratedCase generated = generateCase(seed);
    for (const ir::Node *node : generated.graph->nodes())
      seen.insert(node->op());
  }
  for (ir::OpKind op : loweredOps())
    EXPECT_TRUE(seen.count(op)) << ir::opName(op) << " appears in none of the first 1500 cases";
}

TEST(FuzzInputDomains, NamesRoundTrip) {
  InputDomain index{InputDomain::Kind::Index, {5, 3, 12}};
  EXPECT_EQ(inputName(index, 7), "k5x3x12_7");
  EXPECT_EQ(parseInputName("k5x3x12_7").dims, (std::vector<int64_t>{5, 3, 12}));
  EXPECT_EQ(parseInputName("p_3").kind, InputDomain::Kind::Positive);
  EXPECT_THROW(parseInputName("x"), Error);
  EXPECT_THROW(parseInputName("q_1"), Error);
  EXPECT_THROW(parseInputName("k_1"), Error);
}

TEST(FuzzInputDomains, ValuesStayInTheirDomain) {
  Tensor indices = makeInput({DType::I64, {200}}, {InputDomain::Kind::Index, {4, 2}}, 9);
  for (int64_t i = 0; i < 200; ++i) {
    int64_t dim = i % 2 == 0 ? 4 : 2;
    EXPECT_GE(indices.getInt(i), -dim);
    EXPECT_LT(indices.getInt(i), dim);
  }
  Tensor positive = makeInput({DType::BF16, {100}}, {InputDomain::Kind::Positive, {}}, 3);
  for (int64_t i = 0; i < 100; ++i) {
    double v = positive.getDouble(i);
    EXPECT_GE(v, 0.25);
    EXPECT_LE(v, 2.0);
    EXPECT_EQ(v * 8, std::floor(v * 8)) << "off the grid of eighths";
  }
  EXPECT_TRUE(makeInput({DType::F32, {64}}, {InputDomain::Kind::Signed, {}}, 1)
                  .identical(makeInput({DType::F32, {64}}, {InputDomain::Kind::Signed, {}}, 1)));
}

} // namespace
} // namespace kiln::fuzz
