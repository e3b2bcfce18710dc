#pragma once
// Sixteen float lanes and the activations of recurrent cells on them (kiln_cell_activation),
// for the recurrent kernel (runtime/kernels/Recurrence.cpp). Internal to runtime/kernels/.
//
// With AVX-512 a Lanes is one zmm register; otherwise an array the compiler may vectorise,
// with the same results lane by lane. sigmoid and tanh are computed in the registers:
// sigmoid(x) = 1 / (1 + exp(-x)) with Cephes' exp (range reduction by ln 2, a degree-6
// polynomial, about 1 ulp) and tanh by Eigen's 13/6 rational approximation (a few ulps over
// [-8, 8], x itself below 4e-4, +-1 beyond 8). ELU and softplus, which need expm1 and log1p
// near 0 to keep their relative precision, go through the C library lane by lane.
#include <cmath>
#include <cstdint>

#include "runtime/KernelAbi.h"
#include "runtime/kernels/Simd.h"

namespace kiln::runtime::kernels::detail {

inline constexpr int64_t kLanes = 16;

#ifdef __AVX512F__

using Lanes = __m512;
inline Lanes splat(float x) { return _mm512_set1_ps(x); }
inline Lanes load(const float *p) { return _mm512_loadu_ps(p); }
/// The first n lanes of p (others 0); reads nothing past p[n - 1].
inline Lanes loadFirst(const float *p, int64_t n) { return _mm512_maskz_loadu_ps(firstLanes(n), p); }
inline void store(float *p, Lanes v) { _mm512_storeu_ps(p, v); }
/// Writes the first n lanes only.
inline void storeFirst(float *p, Lanes v, int64_t n) { _mm512_mask_storeu_ps(p, firstLanes(n), v); }
inline Lanes add(Lanes a, Lanes b) { return _mm512_add_ps(a, b); }
inline Lanes sub(Lanes a, Lanes b) { return _mm512_sub_ps(a, b); }
inline Lanes mul(Lanes a, Lanes b) { return _mm512_mul_ps(a, b); }
inline Lanes div(Lanes a, Lanes b) { return _mm512_div_ps(a, b); }
/// a * b + c
inline Lanes fma(Lanes a, Lanes b, Lanes c) { return _mm512_fmadd_ps(a, b, c); }
inline Lanes min(Lanes a, Lanes b) { return _mm512_min_ps(a, b); }
inline Lanes max(Lanes a, Lanes b) { return _mm512_max_ps(a, b); }
inline Lanes abs(Lanes a) { return _mm512_abs_ps(a); }
/// where a < b (lane by lane): ifTrue, else ifFalse
inline Lanes selectLess(Lanes a, Lanes b, Lanes ifTrue, Lanes ifFalse) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), ifFalse, ifTrue);
}
inline Lanes floor(Lanes a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
/// a * 2^e for integral e
inline Lanes scale2(Lanes a, Lanes e) { return _mm512_scalef_ps(a, e); }

#else

struct Lanes {
  float v[kLanes];
};
template <typename Fn> inline Lanes each(Fn fn) {
  Lanes r;
  for (int64_t i = 0; i < kLanes; ++i)
    r.v[i] = fn(i);
  return r;
}
inline Lanes splat(float x) { return each([&](int64_t) { return x; }); }
inline Lanes load(const float *p) { return each([&](int64_t i) { return p[i]; }); }
inline Lanes loadFirst(const float *p, int64_t n) { return each([&](int64_t i) { return i < n ? p[i] : 0.0f; }); }
inline void store(float *p, Lanes v) {
  for (int64_t i = 0; i < kLanes; ++i)
    p[i] = v.v[i];
}
inline void storeFirst(float *p, Lanes v, int64_t n) {
  for (int64_t i = 0; i < n && i < kLanes; ++i)
    p[i] = v.v[i];
}
inline Lanes add(Lanes a, Lanes b) { return each([&](int64_t i) { return a.v[i] + b.v[i]; }); }
inline Lanes sub(Lanes a, Lanes b) { return each([&](int64_t i) { return a.v[i] - b.v[i]; }); }
inline Lanes mul(Lanes a, Lanes b) { return each([&](int64_t i) { return a.v[i] * b.v[i]; }); }
inline Lanes div(Lanes a, Lanes b) { return each([&](int64_t i) { return a.v[i] / b.v[i]; }); }
inline Lanes fma(Lanes a, Lanes b, Lanes c) { return each([&](int64_t i) { return std::fma(a.v[i], b.v[i], c.v[i]); }); }
// As the AVX-512 instructions: the second operand when either is NaN.
inline Lanes min(Lanes a, Lanes b) { return each([&](int64_t i) { return a.v[i] < b.v[i] ? a.v[i] : b.v[i]; }); }
inline Lanes max(Lanes a, Lanes b) { return each([&](int64_t i) { return a.v[i] > b.v[i] ? a.v[i] : b.v[i]; }); }
inline Lanes abs(Lanes a) { return each([&](int64_t i) { return std::fabs(a.v[i]); }); }
inline Lanes selectLess(Lanes a, Lanes b, Lanes ifTrue, Lanes ifFalse) {
  return each([&](int64_t i) { return a.v[i] < b.v[i] ? ifTrue.v[i] : ifFalse.v[i]; });
}
inline Lanes floor(Lanes a) { return each([&](int64_t i) { return std::floor(a.v[i]); }); }
inline Lanes scale2(Lanes a, Lanes e) {
  return each([&](int64_t i) { return std::ldexp(a.v[i], static_cast<int>(e.v[i])); });
}

#endif

/// e^x (Cephes' expf: 2^m e^r with |r| <= ln 2 / 2); x clamped to [-88.72, 88.72], so the
/// result is finite and positive (NaN for NaN).
inline Lanes exp(Lanes x) {
  x = min(splat(88.72f), max(splat(-88.72f), x)); // x last: a NaN stays NaN
  const Lanes m = floor(fma(x, splat(1.44269504088896341f), splat(0.5f)));
  Lanes r = fma(m, splat(-0.693359375f), x); // ln 2 in two parts, so r keeps its bits
  r = fma(m, splat(2.12194440e-4f), r);
  const Lanes r2 = mul(r, r);
  Lanes p = fma(splat(1.9875691500e-4f), r, splat(1.3981999507e-3f));
  p = fma(p, r, splat(8.3334519073e-3f));
  p = fma(p, r, splat(4.1665795894e-2f));
  p = fma(p, r, splat(1.6666665459e-1f));
  p = fma(p, r, splat(5.0000001201e-1f));
  const Lanes y = fma(p, r2, add(r, splat(1.0f)));
  return scale2(y, m);
}

inline Lanes sigmoid(Lanes x) { return div(splat(1.0f), add(splat(1.0f), exp(sub(splat(0.0f), x)))); }

inline Lanes tanh(Lanes input) {
  const Lanes x = min(splat(7.99881172180175781f), max(splat(-7.99881172180175781f), input)); // NaN stays
  const Lanes x2 = mul(x, x);
  Lanes p = fma(x2, splat(-2.76076847742355e-16f), splat(2.00018790482477e-13f));
  p = fma(x2, p, splat(-8.60467152213735e-11f));
  p = fma(x2, p, splat(5.12229709037114e-08f));
  p = fma(x2, p, splat(1.48572235717979e-05f));
  p = fma(x2, p, splat(6.37261928875436e-04f));
  p = fma(x2, p, splat(4.89352455891786e-03f));
  p = mul(x, p);
  Lanes q = fma(x2, splat(1.19825839466702e-06f), splat(1.18534705686654e-04f));
  q = fma(x2, q, splat(2.26843463243900e-03f));
  q = fma(x2, q, splat(4.89352518554385e-03f));
  return selectLess(abs(input), splat(0.0004f), input, div(p, q));
}

/// f(x) for one of a cell's functions.
Lanes activate(const kiln_cell_function &f, Lanes x);

} // namespace kiln::runtime::kernels::detail
