#include "runtime/TensorSums.h"

namespace kiln::runtime {

namespace {

/// y[i] = op(y[i], x[i], a) for every element, in y's own type: f32 and f64 directly (a
/// rounded to f32 for f32), f16 and bf16 through double, rounded once per element. x may be y.
template <typename Op> void combine(Tensor &y, double a, const Tensor &x, Op op) {
  const int64_t count = y.numElements();
  if (y.dtype() == DType::F32) {
    float *out = y.dataAs<float>();
    const float *in = x.dataAs<float>();
    const float scale = static_cast<float>(a);
    for (int64_t i = 0; i < count; ++i)
      out[i] = op(out[i], in[i], scale);
  } else if (y.dtype() == DType::F64) {
    double *out = y.dataAs<double>();
    const double *in = x.dataAs<double>();
    for (int64_t i = 0; i < count; ++i)
      out[i] = op(out[i], in[i], a);
  } else {
    for (int64_t i = 0; i < count; ++i)
      y.setDouble(i, op(y.getDouble(i), x.getDouble(i), a));
  }
}

} // namespace

void scaleAndAdd(Tensor &y, double a, const Tensor &x) {
  combine(y, a, x, [](auto out, auto in, auto scale) { return out + scale * in; });
}

void scaleInPlace(Tensor &x, double a) {
  if (a != 1.0) // in place: no tensor allocated per call (the Trainer scales every gradient)
    combine(x, a, x, [](auto, auto in, auto scale) { return scale * in; });
}

} // namespace kiln::runtime
