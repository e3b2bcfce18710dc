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

// Every row of ir/ElementwiseOps.def with a Gradient formula, on x in [0.2, 0.9) (inside every
// row's domain: log, sqrt, asin, ...) and, where the op is finite there, on x in (-0.9, -0.2]
// (relu's and abs's other branch), with x an affine map of the checked input.
TEST(GradElementwise, EveryDifferentiableTableRow) {
  int checked = 0;
  for (const ir::UnaryOpRow &row : ir::unaryOpRows()) {
    if (row.gradient.empty())
      continue;
    SCOPED_TRACE(std::string(ir::opName(row.op)));
    for (double sign : {1.0, -1.0}) {
      Tensor value = ir::opDef(row.op).eval({Tensor::scalar(DType::F64, sign * 0.55)}, {}, {f64({})}).at(0);
      if (!std::isfinite(value.getDouble(0)))
        continue;
      expectGradientsMatch({{f64({2, 3})}}, [&row, sign](ir::Builder &b, const std::vector<ir::Value *> &in) {
        ir::Value *x = b.create(OpKind::Mul, {in[0], b.scalar(DType::F64, 0.35 * sign)});
        x = b.create(OpKind::Add, {x, b.scalar(DType::F64, 0.55 * sign)});
        return b.create(row.op, {x});
      });
    }
    ++checked;
  }
  EXPECT_GE(checked, 21); // neg .. cosh
}

// The formula of a row is checked when it is built: a malformed one names the op and the column.
TEST(GradElementwise, MalformedFormulaIsNamed) {
  ir::Graph graph;
  ir::Builder b(graph);
  ir::Value *x = b.scalar(DType::F64, 0.5);
  passes::autodiff::FormulaValues values{x, x, x};
  EXPECT_NO_THROW(passes::autodiff::buildGradientFormula(b, OpKind::Sinh, "g * cosh(x)", values));
  auto build = [&](const char *formula) {
    return [&b, &values, formula] { passes::autodiff::buildGradientFormula(b, OpKind::Sinh, formula, values); };
  };
  expectErrorContaining(build("g * (cosh(x)"), "the gradient formula of sinh \"g * (cosh(x)\" at column 13: expected ')'");
  expectErrorContaining(build("g * coshh(x)"), "'coshh' is neither cast nor a unary op");
  expectErrorContaining(build("g * cosh(x) )"), "unexpected ')'");
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
