#include "runtime/TensorSums.h"

#include <cstring>

namespace kiln::runtime {

void scaleAndAdd(Tensor &y, double a, const Tensor &x) {
  int64_t count = y.numElements();
  if (y.dtype() == DType::F32) {
    float *out = y.dataAs<float>();
    const float *in = x.dataAs<float>();
    float scale = static_cast<float>(a);
    for (int64_t i = 0; i < count; ++i)
      out[i] += scale * in[i];
  } else if (y.dtype() == DType::F64) {
    double *out = y.dataAs<double>();
    const double *in = x.dataAs<double>();
    for (int64_t i = 0; i < count; ++i)
      out[i] += a * in[i];
  } else {
    for (int64_t i = 0; i < count; ++i)
      y.setDouble(i, y.getDouble(i) + a * x.getDouble(i));
  }
}

void scaleInPlace(Tensor &x, double a) {
  if (a == 1.0)
    return;
  Tensor zero(x.type());
  scaleAndAdd(zero, a, x);
  std::memcpy(x.data(), zero.data(), x.byteSize());
}

} // namespace kiln::runtime
