#include "ops/global_avg_pool.h"

#include <algorithm>

namespace gmlp {

template <class T>
void global_avg_pool_forward(T* y, const T* x, int64_t B, int64_t C, int64_t HW) {
  const T inv = T(1) / T(HW);
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < B * C; ++j) {
    const T* xp = x + j * HW;
    T acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t i = 0; i < HW; ++i) acc += xp[i];
    y[j] = acc * inv;
  }
}

template <class T>
void global_avg_pool_backward(T* dx, const T* dy, int64_t B, int64_t C, int64_t HW) {
  // fwd: y[b, c] = (1/HW) Σ_i x[b, c, i]  =>  dx[b, c, i] = dy[b, c] / HW
  const T inv = T(1) / T(HW);
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < B * C; ++j) std::fill(dx + j * HW, dx + (j + 1) * HW, dy[j] * inv);
}

#define GMLP_INSTANTIATE(T)                                                          \
  template void global_avg_pool_forward<T>(T*, const T*, int64_t, int64_t, int64_t); \
  template void global_avg_pool_backward<T>(T*, const T*, int64_t, int64_t, int64_t);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
