// Layer normalisation over the last C channels of each row (torch.nn.LayerNorm(C, eps)):
//   y = (x - mean) · rstd · γ + β,   rstd = 1/sqrt(var + eps),  var biased (divides by C).
// Rows may be strided (ldx, ldy ≥ C), so the gate can normalise the second half of its input
// in place of a copy.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/row_sum.h"
#include "core/write.h"

namespace gmlp {

// y: (M, C) at stride ldy, overwritten; mean, rstd: (M) saved for backward. With y_bf16 (float
// only), y holds bfloat16 (ldy counts them), rounded as the products round (store_bf16): for an
// output that only products read (core/operand.h).
template <class T>
void layernorm_forward(T* y, int64_t ldy, T* mean, T* rstd, const T* x, int64_t ldx, const T* gamma, const T* beta,
                       int64_t M, int64_t C, T eps, bool y_bf16 = false);

// Accumulates: dx += ∂L/∂x, dgamma += Σ dy·x̂, dbeta += Σ dy. With Write::overwrite, dx = ∂L/∂x.
template <class T>
void layernorm_backward(T* dx, int64_t lddx, T* dgamma, T* dbeta, const T* dy, int64_t lddy, const T* x, int64_t ldx,
                        const T* mean, const T* rstd, const T* gamma, int64_t M, int64_t C,
                        Write dx_write = Write::accumulate);

// One row of each, serial: what the parallel loops above and the fused kernels that normalise
// inside their own tiles (the SGU) share.
template <class T>
inline void layernorm_row(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta, int64_t C, T eps);
// The row's statistics alone, layernorm_row's first steps (the same bits): for a caller that
// normalises only some of the row's columns, with layernorm_row_apply.
template <class T>
[[gnu::always_inline]] inline void layernorm_row_stats(T* mean, T* rstd, const T* x, int64_t C, T eps);
// dx = ∂L/∂x (Write::overwrite) or dx += ∂L/∂x (Write::accumulate). dgamma and dbeta, when
// given, accumulate the row's Σ dy·x̂ and Σ dy.
template <class T>
[[gnu::always_inline]] inline void layernorm_row_backward(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, T mean,
                                                          T rstd, const T* gamma, int64_t C, Write dx_write);

template <class T>
void layernorm_forward_ref(T* y, int64_t ldy, T* mean, T* rstd, const T* x, int64_t ldx, const T* gamma, const T* beta,
                           int64_t M, int64_t C, T eps);
template <class T>
void layernorm_backward_ref(T* dx, int64_t lddx, T* dgamma, T* dbeta, const T* dy, int64_t lddy, const T* x,
                            int64_t ldx, const T* mean, const T* rstd, const T* gamma, int64_t M, int64_t C);

// y = (x - mean)·rstd·γ + β for a row whose statistics are known: layernorm_row's last step, the
// same bits (a backward remaking the normalised row instead of keeping it).
template <class T>
inline void layernorm_row_apply(T* y, const T* x, T mean, T rstd, const T* gamma, const T* beta, int64_t C) {
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) y[c] = (x[c] - mean) * rstd * gamma[c] + beta[c];
}

template <class T>
[[gnu::always_inline]] inline void layernorm_row_stats(T* mean, T* rstd, const T* x, int64_t C, T eps) {
  const T mu = row_sum(x, C) / T(C);
  T ss[1];  // two passes: the variance of the centred values does not cancel
#if defined(GMLP_ROW_SUM_SIMD)
  if constexpr (std::is_same_v<T, float>) {
    using V = SimdLanes;
    const V::Vec m = V::set1(mu);
    row_sums_simd<1>(C, ss, [&](int64_t c, V::Mask k) {
      const V::Vec d = V::keep(k, V::sub(V::load(k, x + c), m));
      return V::mul(d, d);
    });
  } else
#endif
  {
    row_sums_portable<1>(C, ss, [&](int64_t c, int) { return (x[c] - mu) * (x[c] - mu); });
  }
  *mean = mu;
  *rstd = T(1) / std::sqrt(ss[0] / T(C) + eps);
}

template <class T>
inline void layernorm_row(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta, int64_t C, T eps) {
  layernorm_row_stats(mean, rstd, x, C, eps);
  layernorm_row_apply(y, x, *mean, *rstd, gamma, beta, C);
}

template <class T>
[[gnu::always_inline]] inline void layernorm_row_backward(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, T mean,
                                                          T rstd, const T* gamma, int64_t C, Write dx_write) {
  // fwd: x̂ = (x - μ)·r;  y = x̂·γ + β
  //  =>  dx = r · (dŷ - mean(dŷ) - x̂ · mean(dŷ·x̂)),  dŷ = dy·γ
  const T mu = mean, r = rstd;
  T s[2];  // Σ dŷ and Σ dŷ·x̂
#if defined(GMLP_ROW_SUM_SIMD)
  if constexpr (std::is_same_v<T, float>) {
    using V = SimdLanes;
    const V::Vec m = V::set1(mu), rv = V::set1(r);
    row_sums_simd<2>(C, s, [&](int64_t c, V::Mask k) {
      const V::Vec dxh = V::mul(V::load(k, dy + c), V::load(k, gamma + c));
      return TermPair{dxh, V::mul(V::mul(dxh, V::sub(V::load(k, x + c), m)), rv)};
    });
  } else
#endif
  {
    row_sums_portable<2>(C, s, [&](int64_t c, int k) {
      const T dxh = dy[c] * gamma[c];
      return k == 0 ? dxh : dxh * (x[c] - mu) * r;
    });
  }
  const T s1 = s[0] / T(C), s2 = s[1] / T(C);
  // dx, and dγ, dβ where asked for, in one pass over dy and x.
  const auto pass = [&](auto write) {
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      write(dx[c], r * (dy[c] * gamma[c] - s1 - (x[c] - mu) * r * s2));
      if (dgamma) {
        dgamma[c] += dy[c] * (x[c] - mu) * r;
        dbeta[c] += dy[c];
      }
    }
  };
  if (dx_write == Write::overwrite)
    pass([](T& d, T v) { d = v; });  // a fresh buffer may hold anything, NaN included: never read it
  else
    pass([](T& d, T v) { d += v; });
}

}  // namespace gmlp
