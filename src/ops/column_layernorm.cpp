#include "ops/column_layernorm.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace gmlp {

namespace {
// Both passes walk chunks of kChunk columns, one chunk per thread at a time, rows outer so
// that every load is a contiguous run of the chunk.
constexpr int64_t kChunk = 256;
}  // namespace

template <class T>
void column_layernorm_forward(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta, int64_t N,
                              int64_t cols, T eps) {
#pragma omp parallel for schedule(static)
  for (int64_t c0 = 0; c0 < cols; c0 += kChunk) {
    const int64_t c1 = std::min(cols, c0 + kChunk);
    for (int64_t c = c0; c < c1; ++c) mean[c] = 0, rstd[c] = 0;
    for (int64_t n = 0; n < N; ++n)
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) mean[c] += x[n * cols + c];
    for (int64_t c = c0; c < c1; ++c) mean[c] /= T(N);
    // Two passes: the variance of the centred values does not cancel.
    for (int64_t n = 0; n < N; ++n)
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) {
        const T d = x[n * cols + c] - mean[c];
        rstd[c] += d * d;
      }
    for (int64_t c = c0; c < c1; ++c) rstd[c] = T(1) / std::sqrt(rstd[c] / T(N) + eps);
    for (int64_t n = 0; n < N; ++n)
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) y[n * cols + c] = (x[n * cols + c] - mean[c]) * rstd[c] * gamma[n] + beta[n];
  }
}

template <class T>
void column_layernorm_backward(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, const T* mean, const T* rstd,
                               const T* gamma, int64_t N, int64_t cols) {
  // fwd: x̂ = (x - μ)·r;  y = x̂·γ[n] + β[n], per column over its N rows
  //  =>  dx = r · (dx̂ - (Σ dx̂ + x̂ · Σ dx̂·x̂) / N),  dx̂ = dy·γ;  dγ += Σ dy·x̂;  dβ += Σ dy
  // dγ, dβ: each chunk's row sums into a slot of its own, then added chunk by chunk.
  const int64_t chunks = (cols + kChunk - 1) / kChunk;
  thread_local std::vector<T> sums;  // dγ's then dβ's slots; grows once, no allocation per step
  if (sums.size() < size_t(2 * chunks * N)) sums.resize(size_t(2 * chunks * N));
  T* const dg = sums.data();  // the calling thread's buffer, shared with the team below
  T* const db = dg + chunks * N;
  std::fill(dg, dg + 2 * chunks * N, T(0));
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t c0 = k * kChunk, c1 = std::min(cols, c0 + kChunk);
    T s1[kChunk] = {}, s2[kChunk] = {};  // Σ dx̂, Σ dx̂·x̂ per column
    for (int64_t n = 0; n < N; ++n) {
      T g1 = 0, g2 = 0;
      for (int64_t c = c0; c < c1; ++c) {
        const T xh = (x[n * cols + c] - mean[c]) * rstd[c], d = dy[n * cols + c];
        const T dxh = d * gamma[n];
        s1[c - c0] += dxh;
        s2[c - c0] += dxh * xh;
        g1 += d * xh;
        g2 += d;
      }
      dg[k * N + n] += g1;
      db[k * N + n] += g2;
    }
    for (int64_t n = 0; n < N; ++n)
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) {
        const T xh = (x[n * cols + c] - mean[c]) * rstd[c];
        const T dxh = dy[n * cols + c] * gamma[n];
        dx[n * cols + c] = rstd[c] * (dxh - (s1[c - c0] + xh * s2[c - c0]) / T(N));
      }
  }
  for (int64_t k = 0; k < chunks; ++k)
    for (int64_t n = 0; n < N; ++n) dgamma[n] += dg[k * N + n], dbeta[n] += db[k * N + n];
}

template <class T>
void column_layernorm_forward_ref(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta, int64_t N,
                                  int64_t cols, T eps) {
  for (int64_t c = 0; c < cols; ++c) {
    double mu = 0, var = 0;
    for (int64_t n = 0; n < N; ++n) mu += x[n * cols + c];
    mu /= double(N);
    for (int64_t n = 0; n < N; ++n) var += (x[n * cols + c] - mu) * (x[n * cols + c] - mu);
    var /= double(N);
    const double r = 1.0 / std::sqrt(var + double(eps));
    for (int64_t n = 0; n < N; ++n)
      y[n * cols + c] = T((x[n * cols + c] - mu) * r * double(gamma[n]) + double(beta[n]));
    mean[c] = T(mu);
    rstd[c] = T(r);
  }
}

template <class T>
void column_layernorm_backward_ref(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, const T* mean, const T* rstd,
                                   const T* gamma, int64_t N, int64_t cols) {
  // Full Jacobian per column: ∂x̂_m/∂x_n = r·(δ_mn - 1/N - x̂_m·x̂_n/N).
  std::vector<double> dg(size_t(N), 0.0), db(size_t(N), 0.0);
  for (int64_t c = 0; c < cols; ++c) {
    const double r = rstd[c], mu = mean[c];
    for (int64_t n = 0; n < N; ++n) {
      const double xn = (double(x[n * cols + c]) - mu) * r;
      double acc = 0;
      for (int64_t m = 0; m < N; ++m) {
        const double xm = (double(x[m * cols + c]) - mu) * r;
        acc += double(dy[m * cols + c]) * double(gamma[m]) * r * ((m == n) - 1.0 / double(N) - xm * xn / double(N));
      }
      dx[n * cols + c] = T(acc);
      dg[size_t(n)] += double(dy[n * cols + c]) * xn;
      db[size_t(n)] += double(dy[n * cols + c]);
    }
  }
  for (int64_t n = 0; n < N; ++n) dgamma[n] += T(dg[size_t(n)]), dbeta[n] += T(db[size_t(n)]);
}

#define GMLP_INSTANTIATE(T)                                                                                         \
  template void column_layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int64_t, int64_t, T);         \
  template void column_layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, int64_t, \
                                             int64_t);                                                              \
  template void column_layernorm_forward_ref<T>(T*, T*, T*, const T*, const T*, const T*, int64_t, int64_t, T);     \
  template void column_layernorm_backward_ref<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*,      \
                                                 int64_t, int64_t);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
