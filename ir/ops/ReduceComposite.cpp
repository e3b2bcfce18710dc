// Reduction composites from the ONNX operator set: reduce_l1, reduce_l2, reduce_sum_square,
// reduce_log_sum and reduce_log_sum_exp. They take reduce_sum's attributes (`axes`, empty
// meaning every dim, and `keepdims`) and its output shape, and are defined by decompositions
// over an elementwise map and reduce_sum (reduce_max too, for the stable log-sum-exp).
// reduce_l1 and reduce_sum_square accept integers, computed exactly with reduce_sum's wrapping;
// the others involve sqrt, log or exp and need floats.
#include "ir/Builder.h"
#include "ir/ops/Common.h"

namespace kiln::ir {

using namespace ops;

namespace {

enum class Domain { Numeric, FloatOnly };

// Checks the dtype, then takes the output type from reduce_sum's inference, which also
// validates `axes` and `keepdims` (the attribute schemas are identical).
std::vector<TensorType> inferReduceComposite(Domain domain, const std::vector<TensorType> &in,
                                             const AttrMap &attrs) {
  DType dtype = in[0].dtype;
  if (domain == Domain::FloatOnly && !isFloat(dtype))
    fail("needs a floating-point operand, got {}", dtypeName(dtype));
  if (dtype == DType::Bool)
    fail("needs a numeric operand, got bool");
  return opDef(OpKind::ReduceSum).infer(in, attrs);
}

std::vector<AttrSpec> reduceAttrs() {
  return {intsAttr("axes", std::vector<int64_t>{}), intAttr("keepdims", 0)};
}

template <Domain domain> OpDef reduceCompositeDef(DecomposeFn decompose) {
  OpDef def;
  def.attrs = reduceAttrs();
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    return inferReduceComposite(domain, in, attrs);
  };
  def.decompose = decompose;
  return def;
}

// reduce_sum over the op's own axes, with the given keepdims.
Value *sumOver(Builder &b, Value *x, const AttrMap &attrs, int64_t keepdims) {
  return b.create(OpKind::ReduceSum, {x}, {{"axes", attrInts(attrs, "axes")}, {"keepdims", keepdims}});
}

Value *sumOver(Builder &b, Value *x, const AttrMap &attrs) {
  return sumOver(b, x, attrs, attrInt(attrs, "keepdims"));
}

std::vector<Value *> decomposeReduceL1(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  return {sumOver(b, b.create(OpKind::Abs, {in[0]}), attrs)};
}

std::vector<Value *> decomposeReduceSumSquare(Builder &b, const std::vector<Value *> &in,
                                              const AttrMap &attrs) {
  return {sumOver(b, b.create(OpKind::Mul, {in[0], in[0]}), attrs)};
}

// sqrt(sum of squares), as ONNX defines it: like numpy.linalg.norm it does not rescale, so a
// slice whose squares overflow the dtype gives inf.
std::vector<Value *> decomposeReduceL2(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  Value *sumSquare = b.create(OpKind::ReduceSumSquare, {in[0]},
                              {{"axes", attrInts(attrs, "axes")}, {"keepdims", attrInt(attrs, "keepdims")}});
  return {b.create(OpKind::Sqrt, {sumSquare})};
}

std::vector<Value *> decomposeReduceLogSum(Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
  return {b.create(OpKind::Log, {sumOver(b, in[0], attrs)})};
}

// log(sum(exp(x))) = m + log(sum(exp(x - m))) with m the slice's maximum: every exponent is
// then <= 0, so exp cannot overflow ([1000, 1000] gives 1000 + log 2, not inf), and the sum is
// at least 1, so log cannot underflow to -inf either. An infinite m is replaced by 0:
//  - m = -inf means every element is -inf, and x - m would be -inf - -inf = NaN; with 0 the
//    sum is 0 and the result log(0) = -inf, the right answer;
//  - m = +inf gives inf - inf = NaN the same way; with 0 the sum and the result are +inf.
// A NaN anywhere in the slice makes m NaN and so the result NaN, as it should.
std::vector<Value *> decomposeReduceLogSumExp(Builder &b, const std::vector<Value *> &in,
                                              const AttrMap &attrs) {
  Value *x = in[0];
  int64_t count = 1;
  std::vector<int64_t> axes = normalizeAxes(attrInts(attrs, "axes"), x->rank(), "axes");
  if (axes.empty())
    count = numElements(x->shape());
  for (int64_t axis : axes)
    count = checkedMul(count, x->shape()[axis], "the reduced element count");
  // An empty slice has no maximum (reduce_max rejects it); its sum of exponentials is 0 and
  // the result -inf without any shifting.
  if (count == 0)
    return {b.create(OpKind::Log, {sumOver(b, b.create(OpKind::Exp, {x}), attrs)})};

  Value *max =
      b.create(OpKind::ReduceMax, {x}, {{"axes", attrInts(attrs, "axes")}, {"keepdims", int64_t(1)}});
  Value *shift = b.create(OpKind::Where, {b.create(OpKind::IsInf, {max}), b.scalar(x->dtype(), 0), max});
  Value *exps = b.create(OpKind::Exp, {b.create(OpKind::Sub, {x, shift})});
  Value *sum = sumOver(b, exps, attrs);
  // The shift kept the reduced dims as size 1; without keepdims the sum has dropped them.
  if (shift->shape() != sum->shape())
    shift = b.create(OpKind::Reshape, {shift}, {{"shape", sum->shape()}});
  return {b.create(OpKind::Add, {b.create(OpKind::Log, {sum}), shift})};
}

} // namespace

OpDef defineReduceL1() { return reduceCompositeDef<Domain::Numeric>(decomposeReduceL1); }
OpDef defineReduceSumSquare() { return reduceCompositeDef<Domain::Numeric>(decomposeReduceSumSquare); }
OpDef defineReduceL2() { return reduceCompositeDef<Domain::FloatOnly>(decomposeReduceL2); }
OpDef defineReduceLogSum() { return reduceCompositeDef<Domain::FloatOnly>(decomposeReduceLogSum); }
OpDef defineReduceLogSumExp() { return reduceCompositeDef<Domain::FloatOnly>(decomposeReduceLogSumExp); }

} // namespace kiln::ir
