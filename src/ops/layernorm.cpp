#include "ops/layernorm.h"

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
  // dγ, dβ are column sums, made in the pass that makes dx from each row while the row is in L1:
  // every block of kRows rows sums its rows in order into a partial of its own, and the partials
  // are added in block order, so any thread count gives the same bits. A pass of their own went
  // down the rows again and read dy and x from memory a second time.
  constexpr int64_t kRows = 64;
  const int64_t blocks = (M + kRows - 1) / kRows;
  thread_local std::vector<T> partials;  // per block: Σ dy·x̂, then Σ dy
  if (partials.size() < size_t(blocks * 2 * C)) partials.resize(size_t(blocks * 2 * C));
  T* part = partials.data();
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < blocks; ++k) {
    T* pg = part + k * 2 * C;
    T* pb = pg + C;
    std::fill(pg, pg + 2 * C, T(0));
    for (int64_t i = k * kRows; i < std::min(M, (k + 1) * kRows); ++i)
      layernorm_row_backward(dx + i * lddx, pg, pb, dy + i * lddy, x + i * ldx, mean[i], rstd[i], gamma, C, dx_write);
  }
  for (int64_t k = 1; k < blocks; ++k) {
    const T* q = part + k * 2 * C;
#pragma omp simd
    for (int64_t j = 0; j < 2 * C; ++j) part[j] += q[j];
  }
  for (int64_t j = 0; j < C && blocks > 0; ++j) {
    dgamma[j] += part[j];
    dbeta[j] += part[C + j];
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
