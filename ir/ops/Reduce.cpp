// Reductions. reduce_sum/prod/max/min fold the dims named by `axes` (empty: every dim) and
// drop them, or keep them as size 1 with `keepdims`; reduce_mean is a composite over
// reduce_sum; argmax/argmin return the i64 position of the extreme along one `axis`.
// Integers reduce exactly in int64, wrapping on overflow like the binary ops; floats
// accumulate in double and are rounded once to the output dtype. max and min propagate NaN,
// and argmax/argmin point at the first NaN, so an arg-reduction agrees with the reduction.
#include <cmath>
#include <limits>
#include <type_traits>

#include "ir/Builder.h"
#include "ir/ops/Common.h"

namespace kiln::ir {

using namespace ops;

namespace {

/// Which dims a reduction folds and the shapes around it.
struct ReducePlan {
  std::vector<bool> reduced; // per input dim
  Shape keptShape;           // the input shape with reduced dims set to 1
  Shape outShape;            // keptShape, or without the reduced dims unless keepdims
  int64_t count = 1;         // elements folded into each output element
};

bool readKeepdims(const AttrMap &attrs) {
  int64_t keepdims = attrInt(attrs, "keepdims");
  if (keepdims != 0 && keepdims != 1)
    fail("attribute 'keepdims' must be 0 or 1, got {}", keepdims);
  return keepdims == 1;
}

ReducePlan planReduction(const TensorType &in, const AttrMap &attrs) {
  std::vector<int64_t> axes = normalizeAxes(attrInts(attrs, "axes"), in.rank(), "axes");
  bool keepdims = readKeepdims(attrs);
  ReducePlan plan;
  plan.reduced.assign(in.shape.size(), axes.empty());
  for (int64_t axis : axes)
    plan.reduced[axis] = true;
  for (size_t d = 0; d < in.shape.size(); ++d) {
    plan.keptShape.push_back(plan.reduced[d] ? 1 : in.shape[d]);
    if (plan.reduced[d])
      plan.count = dimMul(plan.count, in.shape[d], "the reduced element count");
    if (!plan.reduced[d] || keepdims)
      plan.outShape.push_back(plan.keptShape.back());
  }
  return plan;
}

enum class Fold { Sum, Prod, Max, Min };

std::vector<TensorType> inferReduce(OpKind op, Fold fold, const TensorType &in, const AttrMap &attrs) {
  if (in.dtype == DType::Bool)
    fail("needs a numeric operand, got bool");
  ReducePlan plan = planReduction(in, attrs);
  // max and min have no identity element to return for an empty reduction.
  if ((fold == Fold::Max || fold == Fold::Min) && plan.count == 0)
    fail("{} over an empty axis (input shape {})", opName(op), shapeToString(in.shape));
  return {TensorType{in.dtype, plan.outShape}};
}

// Unsigned arithmetic wraps modulo 2^64; converting back gives the two's-complement result.
int64_t wrap(uint64_t value) { return static_cast<int64_t>(value); }

template <typename T> T foldIdentity(Fold fold) {
  switch (fold) {
  case Fold::Sum: return 0;
  case Fold::Prod: return 1;
  // Never returned: inference rejects empty max/min reductions.
  case Fold::Max: return std::numeric_limits<T>::lowest();
  case Fold::Min: return std::numeric_limits<T>::max();
  }
  return 0;
}

double foldStep(Fold fold, double acc, double x) {
  switch (fold) {
  case Fold::Sum: return acc + x;
  case Fold::Prod: return acc * x;
  case Fold::Max:
    return std::isnan(acc) || std::isnan(x) ? std::numeric_limits<double>::quiet_NaN() : (x > acc ? x : acc);
  case Fold::Min:
    return std::isnan(acc) || std::isnan(x) ? std::numeric_limits<double>::quiet_NaN() : (x < acc ? x : acc);
  }
  return acc;
}

int64_t foldStep(Fold fold, int64_t acc, int64_t x) {
  switch (fold) {
  case Fold::Sum: return wrap(static_cast<uint64_t>(acc) + static_cast<uint64_t>(x));
  case Fold::Prod: return wrap(static_cast<uint64_t>(acc) * static_cast<uint64_t>(x));
  case Fold::Max: return x > acc ? x : acc;
  case Fold::Min: return x < acc ? x : acc;
  }
  return acc;
}

// Walks the input once in row-major order; each element folds into the accumulator of the
// output element it projects to (its index with reduced dims zeroed).
template <typename T>
std::vector<T> foldInto(const Tensor &x, const ReducePlan &plan, Fold fold, int64_t outCount) {
  std::vector<int64_t> outStrides = contiguousStrides(plan.keptShape);
  for (size_t d = 0; d < outStrides.size(); ++d)
    if (plan.reduced[d])
      outStrides[d] = 0;
  std::vector<T> acc(static_cast<size_t>(outCount), foldIdentity<T>(fold));
  forEachIndex(x.shape(), [&](const std::vector<int64_t> &index, int64_t flat) {
    int64_t target = 0;
    for (size_t d = 0; d < index.size(); ++d)
      target += index[d] * outStrides[d];
    T value;
    if constexpr (std::is_same_v<T, double>)
      value = x.getDouble(flat);
    else
      value = x.getInt(flat);
    acc[target] = foldStep(fold, acc[target], value);
  });
  return acc;
}

Tensor evalReduce(Fold fold, const Tensor &x, const AttrMap &attrs, const TensorType &outType) {
  ReducePlan plan = planReduction(x.type(), attrs);
  Tensor out(outType);
  int64_t n = out.numElements();
  if (isFloat(x.dtype())) {
    std::vector<double> acc = foldInto<double>(x, plan, fold, n);
    for (int64_t i = 0; i < n; ++i)
      out.setDouble(i, acc[i]);
  } else {
    std::vector<int64_t> acc = foldInto<int64_t>(x, plan, fold, n);
    for (int64_t i = 0; i < n; ++i)
      out.setInt(i, acc[i]);
  }
  return out;
}

std::vector<AttrSpec> reduceAttrs() {
  return {intsAttr("axes", std::vector<int64_t>{}), intAttr("keepdims", 0)};
}

template <OpKind op, Fold fold> OpDef reduceDef() {
  OpDef def;
  def.attrs = reduceAttrs();
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    return inferReduce(op, fold, in[0], attrs);
  };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &attrs, const std::vector<TensorType> &out) {
    return std::vector<Tensor>{evalReduce(fold, in[0], attrs, out[0])};
  };
  return def;
}

// --- argmax / argmin ---

/// The input viewed as [outer, extent, inner] around the chosen axis.
struct ArgPlan {
  int64_t outer = 1, extent = 1, inner = 1;
  Shape outShape;
};

ArgPlan planArg(OpKind op, const TensorType &in, const AttrMap &attrs) {
  if (in.dtype == DType::Bool)
    fail("needs a numeric operand, got bool");
  int64_t axis = normalizeAxis(attrInt(attrs, "axis"), in.rank(), "axis");
  bool keepdims = readKeepdims(attrs);
  int64_t selectLast = attrInt(attrs, "select_last_index");
  if (selectLast != 0 && selectLast != 1)
    fail("attribute 'select_last_index' must be 0 or 1, got {}", selectLast);
  if (in.shape[axis] == 0)
    fail("{} over an empty axis (axis {} of shape {})", opName(op), axis, shapeToString(in.shape));
  ArgPlan plan;
  for (int64_t d = 0; d < in.rank(); ++d) {
    if (d < axis)
      plan.outer = dimMul(plan.outer, in.shape[d], "the outer extent");
    else if (d > axis)
      plan.inner = dimMul(plan.inner, in.shape[d], "the inner extent");
    if (d != axis || keepdims)
      plan.outShape.push_back(d == axis ? 1 : in.shape[d]);
  }
  plan.extent = in.shape[axis];
  return plan;
}

template <typename T> bool isNan(T value) {
  if constexpr (std::is_floating_point_v<T>)
    return std::isnan(value);
  else
    return false;
}

// Whether `candidate`, seen after `best`, takes its place. NaN beats every number (numpy's
// argmax and argmin both return the first NaN); ties keep the earlier index unless selectLast.
template <typename T> bool replacesBest(T candidate, T best, bool wantMax, bool selectLast) {
  if (isNan(best))
    return selectLast && isNan(candidate);
  if (isNan(candidate))
    return true;
  if (candidate == best)
    return selectLast;
  return wantMax ? candidate > best : candidate < best;
}

template <typename T>
void argReduce(const Tensor &x, const ArgPlan &plan, bool wantMax, bool selectLast, Tensor &out) {
  auto read = [&x](int64_t i) -> T {
    if constexpr (std::is_same_v<T, double>)
      return x.getDouble(i);
    else
      return x.getInt(i);
  };
  for (int64_t o = 0; o < plan.outer; ++o)
    for (int64_t i = 0; i < plan.inner; ++i) {
      int64_t base = o * plan.extent * plan.inner + i;
      T best = read(base);
      int64_t bestIndex = 0;
      for (int64_t k = 1; k < plan.extent; ++k) {
        T candidate = read(base + k * plan.inner);
        if (replacesBest(candidate, best, wantMax, selectLast)) {
          best = candidate;
          bestIndex = k;
        }
      }
      out.setInt(o * plan.inner + i, bestIndex);
    }
}

template <OpKind op> OpDef argDef() {
  OpDef def;
  def.attrs = {intAttr("axis", 0), intAttr("keepdims", 0), intAttr("select_last_index", 0)};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    return std::vector<TensorType>{{DType::I64, planArg(op, in[0], attrs).outShape}};
  };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &attrs, const std::vector<TensorType> &out) {
    ArgPlan plan = planArg(op, in[0].type(), attrs);
    bool wantMax = op == OpKind::ArgMax;
    bool selectLast = attrInt(attrs, "select_last_index") == 1;
    Tensor result(out[0]);
    if (isFloat(in[0].dtype()))
      argReduce<double>(in[0], plan, wantMax, selectLast, result);
    else
      argReduce<int64_t>(in[0], plan, wantMax, selectLast, result);
    return std::vector<Tensor>{result};
  };
  return def;
}

} // namespace

OpDef defineReduceSum() { return reduceDef<OpKind::ReduceSum, Fold::Sum>(); }
OpDef defineReduceProd() { return reduceDef<OpKind::ReduceProd, Fold::Prod>(); }
OpDef defineReduceMax() { return reduceDef<OpKind::ReduceMax, Fold::Max>(); }
OpDef defineReduceMin() { return reduceDef<OpKind::ReduceMin, Fold::Min>(); }
OpDef defineArgMax() { return argDef<OpKind::ArgMax>(); }
OpDef defineArgMin() { return argDef<OpKind::ArgMin>(); }

// mean = sum * (1 / count), the scale a constant of the input dtype. Over an empty axis the
// count is 0 and the scale inf, so the mean is 0 * inf = NaN, as numpy's mean of nothing.
OpDef defineReduceMean() {
  OpDef def;
  def.attrs = reduceAttrs();
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    if (!isFloat(in[0].dtype))
      fail("needs a floating-point operand, got {}", dtypeName(in[0].dtype));
    return inferReduce(OpKind::ReduceMean, Fold::Sum, in[0], attrs);
  };
  def.decompose = [](Builder &b, const std::vector<Value *> &in, const AttrMap &attrs) {
    Value *x = in[0];
    int64_t count = planReduction(x->type(), attrs).count;
    Value *sum = b.create(OpKind::ReduceSum, {x},
                          {{"axes", attrInts(attrs, "axes")}, {"keepdims", attrInt(attrs, "keepdims")}});
    Value *scale = b.scalar(x->dtype(), 1.0 / static_cast<double>(count));
    return std::vector<Value *>{b.create(OpKind::Mul, {sum, scale})};
  };
  return def;
}

} // namespace kiln::ir
