#include "ops/pool.h"

namespace gmlp {

template <class T>
void mean_pool_forward(T* y, const T* x, int64_t N, int64_t B, int64_t D) {
  const T inv = T(1) / T(N);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    T* yb = y + b * D;
    for (int64_t d = 0; d < D; ++d) yb[d] = 0;
    for (int64_t n = 0; n < N; ++n) {
      const T* xr = x + (n * B + b) * D;
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) yb[d] += xr[d];
    }
    for (int64_t d = 0; d < D; ++d) yb[d] *= inv;
  }
}

template <class T>
void mean_pool_backward(T* dx, const T* dy, int64_t N, int64_t B, int64_t D) {
  // fwd: y = (1/N) Σ_n x[n]  =>  dx[n] += dy / N
  const T inv = T(1) / T(N);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < B; ++b) {
      T* dr = dx + (n * B + b) * D;
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) dr[d] += dy[b * D + d] * inv;
    }
}

template void mean_pool_forward<float>(float*, const float*, int64_t, int64_t, int64_t);
template void mean_pool_forward<double>(double*, const double*, int64_t, int64_t, int64_t);
template void mean_pool_backward<float>(float*, const float*, int64_t, int64_t, int64_t);
template void mean_pool_backward<double>(double*, const double*, int64_t, int64_t, int64_t);

}  // namespace gmlp
