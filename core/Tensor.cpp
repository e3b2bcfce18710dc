#include "core/Tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>

#include "core/Allocation.h"
#include "core/Error.h"

namespace kiln {

namespace {

/// `bytes` of storage (core/Allocation.h: huge pages from 2 MiB), zeroed when `zero`. Huge pages
/// also save the first-touch faults: in this machine's VM those were a third of importing
/// ResNet-50's 100 MB of weights (each byte is touched three times: file, protobuf, tensor).
std::shared_ptr<unsigned char> allocateStorage(const TensorType &type, size_t bytes, bool zero) {
  void *block = allocateBlock(bytes);
  if (!block)
    fail("cannot allocate {} bytes for a tensor of type {}", bytes, type.toString());
  if (zero)
    std::memset(block, 0, bytes);
  return std::shared_ptr<unsigned char>(static_cast<unsigned char *>(block), [](unsigned char *p) { std::free(p); });
}

} // namespace

Tensor::Tensor(TensorType type) : type_(std::move(type)) {
  size_t bytes = 0;
  try {
    bytes = type_.byteSize(); // checked: a negative dim or a count past kiln's limit is refused
  } catch (const Error &e) {
    fail("cannot create a tensor of type {}: {}", type_.toString(), e.what());
  }
  storage_ = allocateStorage(type_, bytes, true);
}

Tensor Tensor::fromDoubles(DType dtype, Shape shape, const std::vector<double> &values) {
  Tensor t(dtype, std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.numElements())
    fail("tensor of type {} needs {} values, got {}", t.type().toString(), t.numElements(),
         values.size());
  for (size_t i = 0; i < values.size(); ++i)
    t.setDouble(static_cast<int64_t>(i), values[i]);
  return t;
}

Tensor Tensor::scalar(DType dtype, double value) { return fromDoubles(dtype, {}, {value}); }

Tensor Tensor::borrow(TensorType type, void *data) {
  // A zero-byte tensor may come with no address; it still needs one to count as defined.
  static unsigned char noBytes;
  size_t bytes = type.byteSize();
  if (!data && bytes > 0)
    fail("cannot borrow {} bytes at a null address for a tensor of type {}", bytes, type.toString());
  Tensor tensor;
  tensor.type_ = std::move(type);
  // The aliasing constructor with no owner: a pointer that frees nothing and counts no owner.
  tensor.storage_ = std::shared_ptr<unsigned char>(std::shared_ptr<unsigned char>(),
                                                   data ? static_cast<unsigned char *>(data) : &noBytes);
  return tensor;
}

double Tensor::getDouble(int64_t i) const {
  const unsigned char *p = storage_.get();
  switch (type_.dtype) {
  case DType::F32: return reinterpret_cast<const float *>(p)[i];
  case DType::F64: return reinterpret_cast<const double *>(p)[i];
  case DType::F16: return halfToFloat(reinterpret_cast<const uint16_t *>(p)[i]);
  case DType::BF16: return bfloat16ToFloat(reinterpret_cast<const uint16_t *>(p)[i]);
  case DType::I64: return static_cast<double>(reinterpret_cast<const int64_t *>(p)[i]);
  case DType::I32: return reinterpret_cast<const int32_t *>(p)[i];
  case DType::I8: return reinterpret_cast<const int8_t *>(p)[i];
  case DType::U8: return reinterpret_cast<const uint8_t *>(p)[i];
  case DType::Bool: return p[i] ? 1.0 : 0.0;
  }
  return 0;
}

// Float-to-integer conversion truncates toward zero like C++ and numpy; NaN and values out of
// range would be undefined behaviour in C++, so they saturate instead.
template <typename Int> static Int saturatingCast(double v) {
  if (std::isnan(v))
    return 0;
  constexpr double lo = static_cast<double>(std::numeric_limits<Int>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<Int>::max());
  if (v <= lo)
    return std::numeric_limits<Int>::min();
  if (v >= hi)
    return std::numeric_limits<Int>::max();
  return static_cast<Int>(v);
}

void Tensor::setDouble(int64_t i, double v) {
  unsigned char *p = storage_.get();
  switch (type_.dtype) {
  case DType::F32: reinterpret_cast<float *>(p)[i] = static_cast<float>(v); return;
  case DType::F64: reinterpret_cast<double *>(p)[i] = v; return;
  case DType::F16: reinterpret_cast<uint16_t *>(p)[i] = floatToHalf(static_cast<float>(v)); return;
  case DType::BF16:
    reinterpret_cast<uint16_t *>(p)[i] = floatToBFloat16(static_cast<float>(v));
    return;
  case DType::I64: reinterpret_cast<int64_t *>(p)[i] = saturatingCast<int64_t>(v); return;
  case DType::I32: reinterpret_cast<int32_t *>(p)[i] = saturatingCast<int32_t>(v); return;
  case DType::I8: reinterpret_cast<int8_t *>(p)[i] = saturatingCast<int8_t>(v); return;
  case DType::U8: reinterpret_cast<uint8_t *>(p)[i] = saturatingCast<uint8_t>(v); return;
  case DType::Bool: p[i] = v != 0.0 ? 1 : 0; return;
  }
}

int64_t Tensor::getInt(int64_t i) const {
  const unsigned char *p = storage_.get();
  switch (type_.dtype) {
  case DType::I64: return reinterpret_cast<const int64_t *>(p)[i];
  case DType::I32: return reinterpret_cast<const int32_t *>(p)[i];
  case DType::I8: return reinterpret_cast<const int8_t *>(p)[i];
  case DType::U8: return reinterpret_cast<const uint8_t *>(p)[i];
  case DType::Bool: return p[i] ? 1 : 0;
  case DType::F32:
  case DType::F64:
  case DType::F16:
  case DType::BF16: return saturatingCast<int64_t>(getDouble(i));
  }
  return 0;
}

void Tensor::setInt(int64_t i, int64_t v) {
  unsigned char *p = storage_.get();
  switch (type_.dtype) {
  // Integer narrowing wraps, as C++ and numpy casts do.
  case DType::I64: reinterpret_cast<int64_t *>(p)[i] = v; return;
  case DType::I32: reinterpret_cast<int32_t *>(p)[i] = static_cast<int32_t>(v); return;
  case DType::I8: reinterpret_cast<int8_t *>(p)[i] = static_cast<int8_t>(v); return;
  case DType::U8: reinterpret_cast<uint8_t *>(p)[i] = static_cast<uint8_t>(v); return;
  case DType::Bool: p[i] = v != 0 ? 1 : 0; return;
  case DType::F32:
  case DType::F64:
  case DType::F16:
  case DType::BF16: setDouble(i, static_cast<double>(v)); return;
  }
}

std::vector<double> Tensor::toDoubles() const {
  std::vector<double> out(static_cast<size_t>(numElements()));
  for (int64_t i = 0; i < numElements(); ++i)
    out[static_cast<size_t>(i)] = getDouble(i);
  return out;
}

Tensor Tensor::clone() const {
  Tensor copy;
  copy.type_ = type_;
  if (storage_) {
    copy.storage_ = allocateStorage(type_, byteSize(), false);
    std::memcpy(copy.storage_.get(), storage_.get(), byteSize());
  }
  return copy;
}

Tensor Tensor::reshaped(Shape shape) const {
  if (kiln::numElements(shape) != numElements())
    fail("cannot view a tensor of type {} with shape {}", type_.toString(), shapeToString(shape));
  Tensor view = *this;
  view.type_.shape = std::move(shape);
  return view;
}

Tensor Tensor::viewAs(TensorType type) const {
  // Compared as element counts: numElements refuses a negative or overflowing shape, and no
  // product can wrap.
  const size_t elementBytes = dtypeSize(type.dtype);
  if (byteSize() % elementBytes != 0 ||
      static_cast<uint64_t>(kiln::numElements(type.shape)) != byteSize() / elementBytes)
    fail("cannot view a tensor of type {} as {}", type_.toString(), type.toString());
  Tensor view = *this;
  view.type_ = std::move(type);
  return view;
}

bool Tensor::identical(const Tensor &other) const {
  if (type_ != other.type_ || defined() != other.defined())
    return false;
  return !defined() || byteSize() == 0 || std::memcmp(data(), other.data(), byteSize()) == 0;
}

uint16_t floatToHalf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t exponent = (bits >> 23) & 0xffu;
  uint32_t mantissa = bits & 0x7fffffu;
  if (exponent == 0xff) // inf or nan; keep nan quiet and non-zero
    return static_cast<uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u : 0));
  int32_t e = static_cast<int32_t>(exponent) - 127 + 15;
  if (e >= 31)
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) { // subnormal half or zero
    if (e < -10)
      return static_cast<uint16_t>(sign);
    mantissa |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u)))
      ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))
    ++half; // may carry into the exponent, which is the correct rounding to the next binade
  return static_cast<uint16_t>(sign | half);
}

float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else { // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mantissa <<= 1;
      } while ((mantissa & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mantissa & 0x3ffu) << 13);
    }
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  }
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

uint16_t floatToBFloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // nan stays nan
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  uint32_t roundingBias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + roundingBias) >> 16);
}

float bfloat16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

Tensor randomTensor(const TensorType &type, uint64_t seed) {
  Tensor t(type);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::uniform_int_distribution<int64_t> small(0, 9);
  for (int64_t i = 0; i < t.numElements(); ++i) {
    if (isFloat(type.dtype))
      t.setDouble(i, uniform(rng));
    else if (type.dtype == DType::Bool)
      t.setInt(i, small(rng) % 2);
    else
      t.setInt(i, small(rng));
  }
  return t;
}

Comparison compareTensors(const Tensor &got, const Tensor &want, double rtol, double atol) {
  Comparison result;
  if (got.type() != want.type()) {
    result.ok = false;
    result.message =
        fmt::format("type mismatch: got {}, expected {}", got.type().toString(), want.type().toString());
    return result;
  }
  double worstExcess = -1;
  for (int64_t i = 0; i < got.numElements(); ++i) {
    double g = got.getDouble(i), w = want.getDouble(i);
    double excess;
    if (std::isnan(g) || std::isnan(w)) {
      excess = (std::isnan(g) && std::isnan(w)) ? -1 : INFINITY;
    } else if (std::isinf(g) || std::isinf(w)) {
      excess = g == w ? -1 : INFINITY;
    } else {
      double absErr = std::fabs(g - w);
      result.maxAbsError = std::max(result.maxAbsError, absErr);
      if (w != 0)
        result.maxRelError = std::max(result.maxRelError, absErr / std::fabs(w));
      excess = absErr - atol - rtol * std::fabs(w);
    }
    if (excess > worstExcess) {
      worstExcess = excess;
      result.worstIndex = i;
      result.worstGot = g;
      result.worstWant = w;
    }
  }
  if (worstExcess > 0) {
    result.ok = false;
    // Report the multi-index of the worst element so a user can find it.
    std::vector<int64_t> index(got.shape().size());
    int64_t rest = result.worstIndex;
    for (int d = static_cast<int>(index.size()) - 1; d >= 0; --d) {
      index[d] = got.shape()[d] ? rest % got.shape()[d] : 0;
      rest = got.shape()[d] ? rest / got.shape()[d] : 0;
    }
    result.message = fmt::format("worst element [{}]: got {}, expected {} (rtol {}, atol {})",
                                 fmt::join(index, ","), result.worstGot, result.worstWant, rtol, atol);
  }
  return result;
}

std::string tensorSummary(const Tensor &tensor, int maxElements) {
  std::string out = tensor.type().toString() + " {";
  int64_t n = tensor.numElements();
  for (int64_t i = 0; i < n; ++i) {
    if (n > maxElements && i == maxElements / 2) {
      out += "..., ";
      i = n - maxElements / 2;
    }
    out += fmt::format("{}{}", tensor.getDouble(i), i + 1 < n ? ", " : "");
  }
  return out + "}";
}

} // namespace kiln
