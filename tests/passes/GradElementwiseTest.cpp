// Finite-difference checks of the elementwise gradient rules: every differentiable row of
// ir/ElementwiseOps.def,
// the binary arithmetic ops with and without broadcasting, where, cast and clip.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "ir/Builder.h"
#include "ir/ElementwiseOps.h"
#include "passes/autodiff/GradientFormula.h"
#include "tests/ErrorMatchers.h"
#include "tests/passes/GradCheck.h"

namespace kiln::test {


namespace {

using ir::OpKind;

TensorType f64(Shape shape) { return {DType::F64, std::move(shape)}; }

GradBuildFn unaryOp(OpKind op) {
  return [op](ir::Builder &b, const std::vector<ir::Value *> &in) { return b.create(op, {in[0]}); };
}
GradBuildFn binaryOp(OpKind op) {
  return [op](ir::Builder &b, const std::vector<ir::Value *> &in) { return b.create(op, {in[0], in[1]}); };
}

// Every unary row of ir/ElementwiseOps.def with a Gradient formula, on x in [0.2, 0.9) (inside
// most rows' domains: log, sqrt, asin, ...) and, where the op is finite there, on x in
// (-0.9, -0.2] (relu's and abs's other branch), with x an affine map of the checked input. A row
// finite at neither is checked on [1.2, 1.9) (acosh's domain); one finite nowhere fails.
TEST(GradElementwise, EveryDifferentiableUnaryRow) {
  auto finiteAt = [](OpKind op, double x) {
    Tensor value = ir::opDef(op).eval({Tensor::scalar(DType::F64, x)}, {}, {f64({})}).at(0);
    return std::isfinite(value.getDouble(0));
  };
  int checked = 0;
  for (const ir::UnaryOpRow &row : ir::unaryOpRows()) {
    if (row.gradient.empty())
      continue;
    SCOPED_TRACE(std::string(ir::opName(row.op)));
    std::vector<double> centers;
    for (double center : {0.55, -0.55})
      if (finiteAt(row.op, center))
        centers.push_back(center);
    if (centers.empty() && finiteAt(row.op, 1.55))
      centers.push_back(1.55);
    EXPECT_FALSE(centers.empty()) << "no point to check the gradient at";
    for (double center : centers)
      expectGradientsMatch({{f64({2, 3})}}, [&row, center](ir::Builder &b, const std::vector<ir::Value *> &in) {
        ir::Value *x = b.create(OpKind::Mul, {in[0], b.scalar(DType::F64, center < 0 ? -0.35 : 0.35)});
        x = b.create(OpKind::Add, {x, b.scalar(DType::F64, center)});
        return b.create(row.op, {x});
      });
    ++checked;
  }
  EXPECT_GE(checked, 21); // neg .. cosh
}

// Every binary row with a Gradient formula, on positive operands (inside pow's and div's
// domains); the broadcasting cases follow below.
TEST(GradElementwise, EveryDifferentiableBinaryRow) {
  int checked = 0;
  for (const ir::BinaryOpRow &row : ir::binaryOpRows()) {
    if (row.gradient.empty())
      continue;
    SCOPED_TRACE(std::string(ir::opName(row.op)));
    expectGradientsMatch({{f64({2, 3}), true}, {f64({2, 3}), true}}, binaryOp(row.op));
    ++checked;
  }
  EXPECT_EQ(checked, 7); // add sub mul div pow max min
}

// A gradient is checked when it is built: a malformed one names the op and the column.
TEST(GradElementwise, MalformedFormulaIsNamed) {
  ir::Graph graph;
  ir::Builder b(graph);
  ir::Value *x = b.scalar(DType::F64, 0.5);
  passes::autodiff::FormulaValues values{x, {x}, x};
  EXPECT_NO_THROW(passes::autodiff::buildGradientFormula(b, OpKind::Sinh, "g * cosh(x)", values));
  auto build = [&](const char *formula) {
    return [&b, &values, formula] { passes::autodiff::buildGradientFormula(b, OpKind::Sinh, formula, values); };
  };
  expectErrorContaining(build("g * (cosh(x)"), "the gradient formula of sinh \"g * (cosh(x)\" at column 13: expected ')'");
  expectErrorContaining(build("g * coshh(x)"), "'coshh' is neither cast, where nor an op of ir/ElementwiseOps.def");
  expectErrorContaining(build("g * cosh(x) )"), "unexpected ')'");
  expectErrorContaining(build("g * a"), "'a' is not a name of this gradient");
  expectErrorContaining(build("g; g"), "2 results for 1 operands");
  expectErrorContaining(build("g * pow(x)"), "pow takes 2 arguments, got 1");
  expectErrorContaining(build("s = x; s = g; s"), "'s' is already defined");
}

// Definitions are shared: max's "s = ...; g * s; g * (1 - s)" builds s once.
TEST(GradElementwise, DefinitionIsBuiltOnce) {
  ir::Graph graph;
  ir::Builder b(graph);
  ir::Value *a = b.scalar(DType::F64, 0.5), *c = b.scalar(DType::F64, 0.25);
  size_t before = graph.nodes().size();
  std::vector<ir::Value *> grads = passes::autodiff::buildGradientFormula(
      b, OpKind::Max, ir::binaryOpRow(OpKind::Max)->gradient, {c, {a, c}, a});
  ASSERT_EQ(grads.size(), 2u);
  // gt, cast, eq, cast, 0.5, mul, add; mul; 1, sub, mul
  EXPECT_EQ(graph.nodes().size() - before, 11u);
}

TEST(GradElementwise, UnaryOnScalar) { expectGradientsMatch({{f64({})}}, unaryOp(OpKind::Tanh)); }

TEST(GradElementwise, PiecewiseConstantOpsHaveZeroGradient) {
  for (OpKind op : {OpKind::Floor, OpKind::Ceil, OpKind::Round, OpKind::Sign}) {
    SCOPED_TRACE(std::string(ir::opName(op)));
    // x * 2.3 keeps every element away from the steps, where the finite difference would jump.
    expectGradientsMatch({{f64({4})}}, [op](ir::Builder &b, const std::vector<ir::Value *> &in) {
      ir::Value *x = b.create(OpKind::Mul, {in[0], b.scalar(DType::F64, 2.3)});
      return b.create(OpKind::Add, {b.create(op, {x}), in[0]});
    });
  }
}

TEST(GradElementwise, BinarySameShape) {
  for (OpKind op : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Max, OpKind::Min}) {
    SCOPED_TRACE(std::string(ir::opName(op)));
    expectGradientsMatch({{f64({2, 3})}, {f64({2, 3}), op == OpKind::Div}}, binaryOp(op));
  }
}

TEST(GradElementwise, BinaryBroadcasting) {
  // [2,1,3] with [4,1]: both operands broadcast, on leading and size-1 axes; and a scalar.
  for (OpKind op : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Max, OpKind::Min}) {
    SCOPED_TRACE(std::string(ir::opName(op)));
    expectGradientsMatch({{f64({2, 1, 3})}, {f64({4, 1}), op == OpKind::Div}}, binaryOp(op));
    expectGradientsMatch({{f64({}), op == OpKind::Div}, {f64({2, 2}), op == OpKind::Div}}, binaryOp(op));
  }
}

TEST(GradElementwise, PowBothOperands) {
  expectGradientsMatch({{f64({2, 3}), true}, {f64({3})}}, binaryOp(OpKind::Pow));
}

TEST(GradElementwise, ModBothOperands) {
  // fmod-style and floor-style remainders; operands kept away from the quotient's jumps.
  expectGradientsMatch({{f64({5}), true}, {f64({5}), true}}, [](ir::Builder &b, const std::vector<ir::Value *> &in) {
    ir::Value *scaled = b.create(OpKind::Mul, {in[0], b.scalar(DType::F64, 3.7)});
    return b.create(OpKind::Mod, {scaled, in[1]});
  });
}

TEST(GradElementwise, WhereWithBroadcastBranches) {
  expectGradientsMatch({{f64({2, 3})}, {f64({3})}, {f64({2, 1})}},
                       [](ir::Builder &b, const std::vector<ir::Value *> &in) {
                         ir::Value *cond = b.create(OpKind::Gt, {in[0], b.scalar(DType::F64, 0.0)});
                         return b.create(OpKind::Where, {cond, in[1], in[2]});
                       });
}

TEST(GradElementwise, ComparisonsContributeNothing) {
  // x * (x > 0) has gradient (x > 0): the comparison's path adds nothing.
  expectGradientsMatch({{f64({6})}}, [](ir::Builder &b, const std::vector<ir::Value *> &in) {
    ir::Value *positive = b.create(OpKind::Gt, {in[0], b.scalar(DType::F64, 0.0)});
    return b.create(OpKind::Mul, {in[0], b.create(OpKind::Cast, {positive}, {{"to", DType::F64}})});
  });
}

TEST(GradElementwise, CastFloatToFloat) {
  // A float cast passes the gradient through (converted back). Only f64 -> f64 is checkable at
  // these tolerances: a 1e-6 step is below f32's resolution.
  expectGradientsMatch({{f64({2, 2})}}, [](ir::Builder &b, const std::vector<ir::Value *> &in) {
    ir::Value *same = b.create(OpKind::Cast, {in[0]}, {{"to", DType::F64}});
    return b.create(OpKind::Mul, {same, same});
  });
}

TEST(GradElementwise, ClipPassesInsideBoundsOnly) {
  expectGradientsMatch({{f64({3, 4})}}, [](ir::Builder &b, const std::vector<ir::Value *> &in) {
    return b.create(OpKind::Clip, {in[0]}, {{"min", -0.4}, {"max", 0.5}});
  });
  expectGradientsMatch({{f64({5})}}, [](ir::Builder &b, const std::vector<ir::Value *> &in) {
    return b.create(OpKind::Clip, {in[0]}, {{"max", 0.1}}); // min defaults to -inf
  });
}

} // namespace
} // namespace kiln::test
