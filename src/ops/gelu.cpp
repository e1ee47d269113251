#include "ops/gelu.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/bf16.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/fast_math.h"
#include "core/gemm.h"
#include "core/matmul.h"
#include "core/operand.h"
#include "core/threads.h"
#include "ops/gelu_avx512.h"
#include "ops/linear.h"

namespace gmlp {

namespace {
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

// A branch-free float erf that the compiler vectorises (libm's is a scalar call); exp is in
// core/fast_math.h. Float GELU runs on them where the CPU has no AVX-512 (ops/gelu_avx512.h
// otherwise); double keeps libm's.
// erf: the odd/even rational minimax approximation on [-4, 4] used by XLA and Eigen (max error
// a few ulp; |erf| rounds to 1 beyond 4 in float).
inline float erf_fast(float x) {
  // min/max: the nested select this replaces compiled to more compares and blends, an eighth
  // of GELU's time (GCC selects erf(4) for the upper clamp after the quotient instead).
  x = std::min(4.f, std::max(-4.f, x));
  const float x2 = x * x;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 - 2.10102402082508e-06f;
  p = p * x2 - 5.69250639462346e-05f;
  p = p * x2 - 7.34990630326855e-04f;
  p = p * x2 - 2.95459980854025e-03f;
  p = p * x2 - 1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * x2 - 2.13374055278905e-04f;
  q = q * x2 - 1.68282697438203e-03f;
  q = q * x2 - 7.37332916720468e-03f;
  q = q * x2 - 1.42647390514189e-02f;
  return x * p / q;
}

inline float erf_of(float x) { return erf_fast(x); }
inline double erf_of(double x) { return std::erf(x); }
inline float gauss_of(float x) { return exp_nonpositive(-0.5f * x * x); }
inline double gauss_of(double x) { return std::exp(-0.5 * x * x); }

// GELU from e = erf(x/√2): y = x·Φ(x), and its derivative Φ(x) + x·φ(x). Every loop below takes
// them from here, so the forward, the slope it saves and the backward agree to the bit.
template <class T>
inline T erf_scaled(T x) {
  return erf_of(x * T(kInvSqrt2));
}
template <class T>
inline T gelu_of(T x, T e) {
  return T(0.5) * x * (T(1) + e);
}

template <class T>
inline T gelu_slope_of(T x, T e) {
  const T cdf = T(0.5) * (T(1) + e);
  const T pdf = T(kInvSqrt2Pi) * gauss_of(x);
  return cdf + x * pdf;
}

// Whether the float loops run on AVX-512's (ops/gelu_avx512.h): where the CPU has it.
bool avx512() {
  static const bool on = cpu_features().avx512f;
  return on;
}
}  // namespace

// Inner loops on one thread's contiguous share, written so the compiler vectorises them. The
// forward may run in place (y = x): each element is read before it is written.
template <class T>
void gelu_forward_span(T* y, const T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    if (avx512()) return gelu_avx512::forward(y, x, n, nullptr, false);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = gelu_of(x[i], erf_scaled(x[i]));
}

template <class T>
void gelu_backward_span(T* __restrict dx, const T* __restrict dy, const T* __restrict x, int64_t n) {
  // fwd: y = x·Φ(x)  =>  dx += dy·(Φ(x) + x·φ(x))
  if constexpr (std::is_same_v<T, float>)
    if (avx512()) return gelu_avx512::backward(dx, dy, x, n);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] += dy[i] * gelu_slope_of(x[i], erf_scaled(x[i]));
}

template <class T>
void gelu_backward_inplace_span(T* __restrict d, const T* __restrict x, int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    if (avx512()) return gelu_avx512::backward_inplace(d, x, n);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) d[i] *= gelu_slope_of(x[i], erf_scaled(x[i]));
}

// Calls f(begin, end) on each thread's contiguous share of [0, n), split at multiples of 16.
template <class F>
void parallel_spans(int64_t n, F&& f) {
#pragma omp parallel
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t per = (n / nt + 15) / 16 * 16;
    const int64_t begin = std::min(n, t * per), end = t == nt - 1 ? n : std::min(n, begin + per);
    if (begin < end) f(begin, end);
  }
}

template <class T>
void gelu_forward(T* y, const T* x, int64_t n) {
  parallel_spans(n, [&](int64_t b, int64_t e) { gelu_forward_span(y + b, x + b, e - b); });
}

template <class T>
bool gelu_slope_bf16() {
  return std::is_same_v<T, float> && matmul_precision() == Precision::bf16;
}

namespace {
// y = GELU(x) and the slope, from one erf, the slope stored as S (T, or bfloat16 for float).
template <class T, class S>
void gelu_and_slope(T* y, const T* x, int64_t n, S* slope) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T xi = x[i], e = erf_scaled(xi);
    const T s = gelu_slope_of(xi, e);
    if constexpr (std::is_same_v<S, uint16_t>)
      slope[i] = float_to_bf16(s);
    else
      slope[i] = s;
    y[i] = gelu_of(xi, e);
  }
}
}  // namespace

template <class T>
void gelu_forward_serial(T* y, const T* x, int64_t n, T* slope, bool slope_bf16) {
  if (!slope) return gelu_forward_span(y, x, n);
  if constexpr (std::is_same_v<T, float>) {
    if (avx512()) return gelu_avx512::forward(y, x, n, slope, slope_bf16);
    if (slope_bf16) return gelu_and_slope(y, x, n, reinterpret_cast<uint16_t*>(slope));
  }
  GMLP_CHECK(!slope_bf16);
  gelu_and_slope(y, x, n, slope);
}

namespace {
// d[i] = d[i] · slope[i], with the product also added to acc[i] when acc is given.
template <class T, class S>
void scale_by_slope(T* __restrict d, const S* __restrict slope, int64_t n, T* __restrict acc) {
  const auto at = [&](int64_t i) {
    if constexpr (std::is_same_v<S, uint16_t>)
      return bf16_to_float(slope[i]);
    else
      return slope[i];
  };
  if (!acc) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) d[i] *= at(i);
    return;
  }
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T v = d[i] * at(i);
    d[i] = v;
    acc[i] += v;
  }
}

template <class T>
void scale_by_slope(T* d, const T* slope, int64_t n, T* acc, bool slope_bf16) {
  if constexpr (std::is_same_v<T, float>)
    if (slope_bf16) return scale_by_slope(d, reinterpret_cast<const uint16_t*>(slope), n, acc);
  GMLP_CHECK(!slope_bf16);
  scale_by_slope(d, slope, n, acc);
}
}  // namespace

template <class T>
void gelu_backward_by_slope_serial(T* d, const T* slope, int64_t n, bool slope_bf16) {
  scale_by_slope(d, slope, n, static_cast<T*>(nullptr), slope_bf16);
}

template <class T>
void gelu_backward_by_slope_row(T* d, const T* slope, int64_t C, T* acc, uint16_t* d16, bool slope_bf16) {
  if constexpr (std::is_same_v<T, float>)
    if (d16) {  // scaled, summed, rounded from registers
      if (slope_bf16) return gemm::round_to_bf16(d16, d, C, reinterpret_cast<const uint16_t*>(slope), acc);
      return gemm::round_to_bf16(d16, d, C, slope, acc);
    }
  GMLP_CHECK(!d16);
  scale_by_slope(d, slope, C, acc, slope_bf16);
}

template <class T>
void gelu_backward_by_slope(T* d, const T* slope, int64_t M, int64_t C, T* dbias, uint16_t* d16, bool slope_bf16) {
  GMLP_CHECK((!d16 || std::is_same_v<T, float>));
  for_rows_summing_columns(dbias, M, C, [&](int64_t i, T* acc) {
    gelu_backward_by_slope_row(d + i * C, element(slope, i * C, slope_bf16), C, acc, d16 ? d16 + i * C : nullptr,
                               slope_bf16);
  });
}

template <class T>
void gelu_backward(T* dx, const T* dy, const T* x, int64_t n) {
  parallel_spans(n, [&](int64_t b, int64_t e) { gelu_backward_span(dx + b, dy + b, x + b, e - b); });
}

template <class T>
void gelu_backward_inplace(T* d, const T* x, int64_t n) {
  parallel_spans(n, [&](int64_t b, int64_t e) { gelu_backward_inplace_span(d + b, x + b, e - b); });
}

template <class T>
void gelu_forward_ref(T* y, const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = T(0.5 * x[i] * (1.0 + std::erf(x[i] * kInvSqrt2)));
}

template <class T>
void gelu_backward_ref(T* dx, const T* dy, const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double xi = x[i];
    const double d = 0.5 * (1.0 + std::erf(xi * kInvSqrt2)) + xi * kInvSqrt2Pi * std::exp(-0.5 * xi * xi);
    dx[i] += T(dy[i] * d);
  }
}

#define GMLP_INSTANTIATE(T)                                                                     \
  template void gelu_forward<T>(T*, const T*, int64_t);                                         \
  template void gelu_forward_serial<T>(T*, const T*, int64_t, T*, bool);                        \
  template bool gelu_slope_bf16<T>();                                                           \
  template void gelu_backward_by_slope<T>(T*, const T*, int64_t, int64_t, T*, uint16_t*, bool); \
  template void gelu_backward_by_slope_serial<T>(T*, const T*, int64_t, bool);                  \
  template void gelu_backward_by_slope_row<T>(T*, const T*, int64_t, T*, uint16_t*, bool);      \
  template void gelu_backward<T>(T*, const T*, const T*, int64_t);                              \
  template void gelu_backward_inplace<T>(T*, const T*, int64_t);                                \
  template void gelu_forward_ref<T>(T*, const T*, int64_t);                                     \
  template void gelu_backward_ref<T>(T*, const T*, const T*, int64_t);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
