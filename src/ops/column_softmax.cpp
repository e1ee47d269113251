#include "ops/column_softmax.h"

#include <algorithm>
#include <cmath>

namespace gmlp {

namespace {
// Chunks of kChunk columns, one per thread at a time, rows outer: every load is a contiguous
// run of the chunk, and the chunk's running max / sum live on the stack.
constexpr int64_t kChunk = 256;
}  // namespace

template <class T>
void column_softmax_forward(T* p, const T* a, int64_t N, int64_t cols) {
#pragma omp parallel for schedule(static)
  for (int64_t c0 = 0; c0 < cols; c0 += kChunk) {
    const int64_t c1 = std::min(cols, c0 + kChunk);
    T mx[kChunk], sum[kChunk];
    for (int64_t c = c0; c < c1; ++c) mx[c - c0] = a[c], sum[c - c0] = 0;
    for (int64_t n = 1; n < N; ++n)
      for (int64_t c = c0; c < c1; ++c) mx[c - c0] = std::max(mx[c - c0], a[n * cols + c]);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = c0; c < c1; ++c) {
        const T e = std::exp(a[n * cols + c] - mx[c - c0]);
        p[n * cols + c] = e;
        sum[c - c0] += e;
      }
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = c0; c < c1; ++c) p[n * cols + c] /= sum[c - c0];
  }
}

template <class T>
void column_softmax_backward(T* da, const T* dp, const T* p, int64_t N, int64_t cols) {
  // fwd: p = softmax over n (a)  =>  da = p ⊙ (dp − Σ_n dp·p), per column
#pragma omp parallel for schedule(static)
  for (int64_t c0 = 0; c0 < cols; c0 += kChunk) {
    const int64_t c1 = std::min(cols, c0 + kChunk);
    T dot[kChunk] = {};
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = c0; c < c1; ++c) dot[c - c0] += dp[n * cols + c] * p[n * cols + c];
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = c0; c < c1; ++c) da[n * cols + c] = p[n * cols + c] * (dp[n * cols + c] - dot[c - c0]);
  }
}

template <class T>
void column_softmax_forward_ref(T* p, const T* a, int64_t N, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) {
    double mx = a[c];
    for (int64_t n = 1; n < N; ++n) mx = std::max(mx, double(a[n * cols + c]));
    double sum = 0;
    for (int64_t n = 0; n < N; ++n) sum += std::exp(double(a[n * cols + c]) - mx);
    for (int64_t n = 0; n < N; ++n) p[n * cols + c] = T(std::exp(double(a[n * cols + c]) - mx) / sum);
  }
}

template <class T>
void column_softmax_backward_ref(T* da, const T* dp, const T* p, int64_t N, int64_t cols) {
  // The Jacobian of a softmax: ∂p_m/∂a_n = p_m·(δ_mn - p_n).
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t m = 0; m < N; ++m)
        acc += double(dp[m * cols + c]) * double(p[m * cols + c]) * ((m == n) - double(p[n * cols + c]));
      da[n * cols + c] = T(acc);
    }
}

#define GMLP_INSTANTIATE(T)                                                           \
  template void column_softmax_forward<T>(T*, const T*, int64_t, int64_t);            \
  template void column_softmax_backward<T>(T*, const T*, const T*, int64_t, int64_t); \
  template void column_softmax_forward_ref<T>(T*, const T*, int64_t, int64_t);        \
  template void column_softmax_backward_ref<T>(T*, const T*, const T*, int64_t, int64_t);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
