// The elementwise ops that are neither unary math nor binary arithmetic: where (a select with
// three-way broadcasting), cast (any dtype to any dtype) and clip (clamp to a closed interval).
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/ops/Common.h"

namespace kiln::ir {

using namespace ops;

OpDef defineWhere() {
  OpDef def;
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &) {
    const TensorType &cond = in[0], &x = in[1], &y = in[2];
    if (cond.dtype != DType::Bool)
      fail("the condition must be bool, got {}", dtypeName(cond.dtype));
    if (x.dtype != y.dtype)
      fail("the two branches have different dtypes {} and {}", dtypeName(x.dtype), dtypeName(y.dtype));
    Shape shape = broadcastShapes(broadcastShapes(cond.shape, x.shape), y.shape);
    return std::vector<TensorType>{{x.dtype, shape}};
  };
  // mapElements reads every operand as double when the branches are float (the condition
  // then reads as 0 or 1) and as exact int64 otherwise, so i64 branches keep all 64 bits.
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &, const std::vector<TensorType> &out) {
    return std::vector<Tensor>{mapElements(
        in, out[0], [](const std::vector<double> &v) { return v[0] != 0 ? v[1] : v[2]; },
        [](const std::vector<int64_t> &v) { return v[0] != 0 ? v[1] : v[2]; })};
  };
  return def;
}

namespace {

// One conversion, chosen so that every element is rounded at most once where it matters:
//  - integer/bool to integer/bool goes through int64: exact for i64 above 2^53; narrowing wraps
//    (numpy's astype), and any non-zero value becomes true;
//  - integer to f32/f16/bf16 first rounds the int64 once to f32 (as C++ and numpy do), because
//    going through double would round large i64 twice (2^60 + 2^36 + 1 would land on a tie);
//  - anything else goes through double: float to integer truncates toward zero and saturates
//    (Tensor::setDouble), float to bool is != 0 (so NaN is true, as in numpy).
Tensor castTensor(const Tensor &x, const TensorType &outType) {
  Tensor out(outType);
  DType from = x.dtype(), to = outType.dtype;
  int64_t n = x.numElements();
  for (int64_t i = 0; i < n; ++i) {
    if (!isFloat(from) && !isFloat(to)) {
      out.setInt(i, x.getInt(i));
    } else if (!isFloat(from) && to != DType::F64) {
      out.setDouble(i, static_cast<double>(static_cast<float>(x.getInt(i))));
    } else if (!isFloat(from)) {
      out.setDouble(i, static_cast<double>(x.getInt(i)));
    } else {
      out.setDouble(i, x.getDouble(i));
    }
  }
  return out;
}

// The int64 nearest to `value` (already an integer or infinite), saturating at the int64 range.
int64_t saturateToInt64(double value) {
  constexpr double kTwoTo63 = 9223372036854775808.0;
  if (value <= -kTwoTo63)
    return std::numeric_limits<int64_t>::min();
  if (value >= kTwoTo63)
    return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(value);
}

} // namespace

OpDef defineCast() {
  OpDef def;
  def.attrs = {dtypeAttr("to")};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    return std::vector<TensorType>{{attrDType(attrs, "to"), in[0].shape}};
  };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &, const std::vector<TensorType> &out) {
    return std::vector<Tensor>{castTensor(in[0], out[0])};
  };
  return def;
}

OpDef defineClip() {
  OpDef def;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  def.attrs = {floatAttr("min", -kInf), floatAttr("max", kInf)};
  def.infer = [](const std::vector<TensorType> &in, const AttrMap &attrs) {
    if (in[0].dtype == DType::Bool)
      fail("needs a numeric operand, got bool");
    double lo = attrFloat(attrs, "min"), hi = attrFloat(attrs, "max");
    if (std::isnan(lo) || std::isnan(hi))
      fail("bounds must not be NaN (min {}, max {})", lo, hi);
    if (lo > hi)
      fail("min {} is greater than max {}", lo, hi);
    return std::vector<TensorType>{in[0]};
  };
  def.eval = [](const std::vector<Tensor> &in, const AttrMap &attrs, const std::vector<TensorType> &out) {
    double lo = attrFloat(attrs, "min"), hi = attrFloat(attrs, "max");
    // Integer tensors clamp to the integers inside [min, max], compared exactly in int64. If
    // no integer lies inside (min 2.2, max 2.8) every element becomes floor(max).
    int64_t intLo = saturateToInt64(std::ceil(lo)), intHi = saturateToInt64(std::floor(hi));
    return std::vector<Tensor>{mapElements(
        in, out[0],
        [lo, hi](const std::vector<double> &v) {
          return std::isnan(v[0]) ? v[0] : std::min(std::max(v[0], lo), hi);
        },
        [intLo, intHi](const std::vector<int64_t> &v) { return std::min(std::max(v[0], intLo), intHi); })};
  };
  return def;
}

} // namespace kiln::ir
