#include <gtest/gtest.h>

#include "ir/Builder.h"
#include "ir/Error.h"
#include "ir/Evaluator.h"
#include "ir/Verifier.h"

using namespace kiln;
using namespace kiln::ir;

TEST(Graph, BuildVerifyEvaluateUnaryChain) {
  Graph g("chain");
  Value *x = g.addInput({DType::F32, {2, 3}}, "x");
  Builder b(g);
  Value *y = b.create(OpKind::Exp, {b.create(OpKind::Neg, {x})});
  g.setOutputs({y});
  verify(g);
  Tensor in = Tensor::fromDoubles(DType::F32, {2, 3}, {0, 1, 2, -1, -2, 0.5});
  auto out = evaluate(g, {in});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NEAR(out[0].getDouble(1), std::exp(-1.0), 1e-7);
  EXPECT_NEAR(out[0].getDouble(3), std::exp(1.0), 1e-6);
}
