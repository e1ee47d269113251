#include "ops/layernorm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/matmul.h"
#include "core/operand.h"

namespace gmlp {

template <class T>
void layernorm_forward(T* y, int64_t ldy, T* mean, T* rstd, const T* x, int64_t ldx, const T* gamma, const T* beta,
                       int64_t M, int64_t C, T eps, bool y_bf16) {
  if (!y_bf16) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < M; ++i) layernorm_row(y + i * ldy, mean + i, rstd + i, x + i * ldx, gamma, beta, C, eps);
    return;
  }
  // Each row is normalised into the thread's row of floats, in L1, then rounded into y.
#pragma omp parallel
  {
    thread_local std::vector<T> row;
    if (row.size() < size_t(C)) row.resize(size_t(C));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < M; ++i) {
      layernorm_row(row.data(), mean + i, rstd + i, x + i * ldx, gamma, beta, C, eps);
      store_bf16(element(y, i * ldy, true), row.data(), C);
    }
  }
}

template <class T>
void layernorm_backward(T* dx, int64_t lddx, T* dgamma, T* dbeta, const T* dy, int64_t lddy, const T* x, int64_t ldx,
                        const T* mean, const T* rstd, const T* gamma, int64_t M, int64_t C, Write dx_write) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i)
    layernorm_row_backward(dx + i * lddx, static_cast<T*>(nullptr), static_cast<T*>(nullptr), dy + i * lddy,
                           x + i * ldx, mean[i], rstd[i], gamma, C, dx_write);
  // dγ, dβ: column sums. Each thread owns a run of whole cache lines of columns and goes down the
  // rows in order, so every column is summed in row order whatever the thread count (the same
  // bits), in one pass over its part of each row. Taken a cache line of columns at a time, each
  // thread went down all the rows once per line, and the pass took three times the rows' own.
  constexpr int64_t kLine = 64 / sizeof(T);
  const int64_t lines = (C + kLine - 1) / kLine;
#pragma omp parallel
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t j0 = std::min(C, lines * t / nt * kLine), j1 = std::min(C, lines * (t + 1) / nt * kLine), n = j1 - j0;
    thread_local std::vector<T> sums;  // Σ dy·x̂, then Σ dy, of the thread's columns
    if (sums.size() < size_t(2 * n)) sums.resize(size_t(2 * n));
    T* ag = sums.data();
    T* ab = ag + n;
    std::fill(ag, ag + 2 * n, T(0));
    for (int64_t i = 0; i < M && n > 0; ++i) {
      const T* xi = x + i * ldx + j0;
      const T* dyi = dy + i * lddy + j0;
      const T mu = mean[i], r = rstd[i];
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) {
        ag[j] += dyi[j] * (xi[j] - mu) * r;
        ab[j] += dyi[j];
      }
    }
    for (int64_t j = 0; j < n; ++j) {
      dgamma[j0 + j] += ag[j];
      dbeta[j0 + j] += ab[j];
    }
  }
}

template <class T>
void layernorm_forward_ref(T* y, int64_t ldy, T* mean, T* rstd, const T* x, int64_t ldx, const T* gamma, const T* beta,
                           int64_t M, int64_t C, T eps) {
  for (int64_t i = 0; i < M; ++i) {
    double mu = 0, var = 0;
    for (int64_t c = 0; c < C; ++c) mu += x[i * ldx + c];
    mu /= C;
    for (int64_t c = 0; c < C; ++c) var += (x[i * ldx + c] - mu) * (x[i * ldx + c] - mu);
    var /= C;
    const double r = 1.0 / std::sqrt(var + eps);
    for (int64_t c = 0; c < C; ++c) y[i * ldy + c] = T((x[i * ldx + c] - mu) * r * gamma[c] + beta[c]);
    mean[i] = T(mu);
    rstd[i] = T(r);
  }
}

template <class T>
void layernorm_backward_ref(T* dx, int64_t lddx, T* dgamma, T* dbeta, const T* dy, int64_t lddy, const T* x,
                            int64_t ldx, const T* mean, const T* rstd, const T* gamma, int64_t M, int64_t C) {
  // Full Jacobian: ∂x̂_c/∂x_k = r·(δ_ck - 1/C - x̂_c·x̂_k/C).
  for (int64_t i = 0; i < M; ++i) {
    const double r = rstd[i];
    for (int64_t k = 0; k < C; ++k) {
      const double xk = (x[i * ldx + k] - mean[i]) * r;
      double acc = 0;
      for (int64_t c = 0; c < C; ++c) {
        const double xc = (x[i * ldx + c] - mean[i]) * r;
        acc += double(dy[i * lddy + c]) * gamma[c] * r * ((c == k) - 1.0 / C - xc * xk / C);
      }
      dx[i * lddx + k] += T(acc);
    }
    for (int64_t c = 0; c < C; ++c) {
      dgamma[c] += dy[i * lddy + c] * T((x[i * ldx + c] - mean[i]) * r);
      dbeta[c] += dy[i * lddy + c];
    }
  }
}

#define GMLP_INSTANTIATE(T)                                                                                            \
  template void layernorm_forward<T>(T*, int64_t, T*, T*, const T*, int64_t, const T*, const T*, int64_t, int64_t, T,  \
                                     bool);                                                                            \
  template void layernorm_backward<T>(T*, int64_t, T*, T*, const T*, int64_t, const T*, int64_t, const T*, const T*,   \
                                      const T*, int64_t, int64_t, Write);                                              \
  template void layernorm_forward_ref<T>(T*, int64_t, T*, T*, const T*, int64_t, const T*, const T*, int64_t, int64_t, \
                                         T);                                                                           \
  template void layernorm_backward_ref<T>(T*, int64_t, T*, T*, const T*, int64_t, const T*, int64_t, const T*,         \
                                          const T*, const T*, int64_t, int64_t);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
