// ops/gelu_avx512.h's loops (this file is compiled with -mavx512f).
//
// With a = |x|, Q(a) = Φ(-a) and T(a) = Φ(-a) - a·φ(a) (the slope at -a) fall from 1/2 to 0 as a
// grows, and Φ(x) = Q, slope(x) = T for x < 0, Φ(x) = 1 - Q, slope(x) = 1 - T otherwise (GELU's
// slope is 1 minus itself mirrored). [0, 6) is cut into 32 intervals of 0.1875, on each Q and T
// are the quartics through their values at the interval's 5 Chebyshev points (fitted once, in
// double), and the 32 coefficients of each power are two registers that vpermi2ps picks from by
// the lane's interval. Beyond 6, a is taken as just under 6: there Q and T are below 1e-8.
#include "ops/gelu_avx512.h"

#include <immintrin.h>

#include <cmath>
#include <utility>

namespace gmlp::gelu_avx512 {

namespace {
constexpr int kIntervals = 32, kDegree = 4;
constexpr double kLimit = 6.0, kWidth = kLimit / kIntervals;  // 0.1875, exact in float

// coef[f][k][j]: the coefficient of w^k, w = a - j·kWidth, of Q (f = 0) or T (f = 1) on interval j.
struct Table {
  alignas(64) float coef[2][kDegree + 1][kIntervals];
  Table() {
    constexpr int m = kDegree + 1;
    const double inv_sqrt2 = 0.70710678118654752440, inv_sqrt2pi = 0.39894228040143267794;
    const auto q = [&](double a) { return 0.5 * std::erfc(a * inv_sqrt2); };
    const auto t = [&](double a) { return q(a) - a * inv_sqrt2pi * std::exp(-0.5 * a * a); };
    for (int f = 0; f < 2; ++f)
      for (int j = 0; j < kIntervals; ++j) {
        // The interpolation conditions as an m × (m + 1) system, solved by Gauss-Jordan elimination.
        double s[m][m + 1];
        for (int i = 0; i < m; ++i) {
          const double w = kWidth * 0.5 * (1 - std::cos(M_PI * (2 * i + 1) / (2 * m)));
          double p = 1;
          for (int k = 0; k < m; ++k) s[i][k] = p, p *= w;
          s[i][m] = f == 0 ? q(j * kWidth + w) : t(j * kWidth + w);
        }
        for (int c = 0; c < m; ++c) {
          int pivot = c;
          for (int r = c + 1; r < m; ++r)
            if (std::fabs(s[r][c]) > std::fabs(s[pivot][c])) pivot = r;
          for (int k = 0; k <= m; ++k) std::swap(s[c][k], s[pivot][k]);
          for (int r = 0; r < m; ++r)
            if (r != c) {
              const double factor = s[r][c] / s[c][c];
              for (int k = 0; k <= m; ++k) s[r][k] -= factor * s[c][k];
            }
        }
        for (int k = 0; k < m; ++k) coef[f][k][j] = float(s[k][m] / s[k][k]);
      }
  }
};

// Φ and the slope of 16 lanes, the tables in registers.
struct Lanes {
  __m512 lo[2][kDegree + 1], hi[2][kDegree + 1];
  Lanes() {
    static const Table table;
    for (int f = 0; f < 2; ++f)
      for (int k = 0; k <= kDegree; ++k)
        lo[f][k] = _mm512_load_ps(table.coef[f][k]), hi[f][k] = _mm512_load_ps(table.coef[f][k] + 16);
  }
  // cdf = Φ(x); with Slope, slope = Φ(x) + x·φ(x).
  template <bool Slope = true>
  void operator()(__m512 x, __m512& cdf, __m512& slope) const {
    const __m512 a = _mm512_min_ps(_mm512_abs_ps(x), _mm512_set1_ps(float(kLimit * (1 - 1e-7))));
    const __m512i j = _mm512_cvttps_epi32(_mm512_mul_ps(a, _mm512_set1_ps(float(1 / kWidth))));
    const __m512 w = _mm512_fmadd_ps(_mm512_cvtepi32_ps(j), _mm512_set1_ps(float(-kWidth)), a);
    const auto poly = [&](int f) {
      __m512 v = _mm512_permutex2var_ps(lo[f][kDegree], j, hi[f][kDegree]);
      for (int k = kDegree - 1; k >= 0; --k) v = _mm512_fmadd_ps(v, w, _mm512_permutex2var_ps(lo[f][k], j, hi[f][k]));
      return v;
    };
    const __mmask16 nonnegative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ);
    const __m512 one = _mm512_set1_ps(1.f);
    const __m512 q = poly(0);
    cdf = _mm512_mask_sub_ps(q, nonnegative, one, q);
    if (!Slope) return;
    const __m512 t = poly(1);
    slope = _mm512_mask_sub_ps(t, nonnegative, one, t);
  }
};

// Whole vectors load and store plainly, the last part-vector under a mask.
template <bool Masked>
inline __m512 load(const float* p, __mmask16 m) {
  return Masked ? _mm512_maskz_loadu_ps(m, p) : _mm512_loadu_ps(p);
}
template <bool Masked>
inline void store(float* p, __mmask16 m, __m512 v) {
  Masked ? _mm512_mask_storeu_ps(p, m, v) : _mm512_storeu_ps(p, v);
}
// Rounded to bfloat16 (to nearest even).
template <bool Masked>
inline void store(uint16_t* p, __mmask16 m, __m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i h = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)), 16);
  if (Masked)
    _mm512_mask_cvtepi32_storeu_epi16(p, m, h);
  else
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(h));
}

// Calls body.template operator()<Masked>(i, m) on each 16 elements from i: whole vectors, then
// the rest under the mask m.
template <class Body>
void over_vectors(int64_t n, const Body& body) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) body.template operator()<false>(i, __mmask16(0xffff));
  if (i < n) body.template operator()<true>(i, __mmask16((1u << (n - i)) - 1));
}
}  // namespace

void forward(float* y, const float* x, int64_t n, float* slope, bool slope_bf16) {
  const Lanes lanes;
  over_vectors(n, [&]<bool Masked>(int64_t i, __mmask16 m) {
    const __m512 xi = load<Masked>(x + i, m);
    __m512 cdf, s;
    if (!slope) {
      lanes.operator()<false>(xi, cdf, s);
      return store<Masked>(y + i, m, _mm512_mul_ps(xi, cdf));
    }
    lanes(xi, cdf, s);
    store<Masked>(y + i, m, _mm512_mul_ps(xi, cdf));
    if (slope_bf16)
      store<Masked>(reinterpret_cast<uint16_t*>(slope) + i, m, s);
    else
      store<Masked>(slope + i, m, s);
  });
}

void backward(float* dx, const float* dy, const float* x, int64_t n) {
  const Lanes lanes;
  over_vectors(n, [&]<bool Masked>(int64_t i, __mmask16 m) {
    __m512 cdf, s;
    lanes(load<Masked>(x + i, m), cdf, s);
    store<Masked>(dx + i, m, _mm512_fmadd_ps(load<Masked>(dy + i, m), s, load<Masked>(dx + i, m)));
  });
}

void backward_inplace(float* d, const float* x, int64_t n) {
  const Lanes lanes;
  over_vectors(n, [&]<bool Masked>(int64_t i, __mmask16 m) {
    __m512 cdf, s;
    lanes(load<Masked>(x + i, m), cdf, s);
    store<Masked>(d + i, m, _mm512_mul_ps(load<Masked>(d + i, m), s));
  });
}

}  // namespace gmlp::gelu_avx512
