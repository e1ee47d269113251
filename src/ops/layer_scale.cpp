#include "ops/layer_scale.h"

#include <algorithm>

namespace gmlp {

template <class T>
void layer_scale_forward(T* x_out, const T* x_in, const T* y, const T* keep, const T* gamma, int64_t N, int64_t B,
                         int64_t D) {
  // rows r = n·B + b of (N, B, D)
  const int64_t M = N * B;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < M; ++r) {
    const T k = keep ? keep[r % B] : T(1);
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) x_out[r * D + d] = x_in[r * D + d] + k * gamma[d] * y[r * D + d];
  }
}

template <class T>
void layer_scale_backward(T* dy, T* dgamma, const T* dx_out, const T* y, const T* keep, const T* gamma, int64_t N,
                          int64_t B, int64_t D) {
  // fwd: x_out = x_in + keep·γ ⊙ y  =>  dγ += Σ (keep·dx_out) ⊙ y;  dy = (keep·dx_out) ⊙ γ
  // Blocked by cache line over channels so each thread owns its dγ; every dγ element adds its
  // rows in row order for any thread count.
  const int64_t M = N * B;
  constexpr int64_t kBlock = 64 / sizeof(T);
#pragma omp parallel for schedule(static)
  for (int64_t d0 = 0; d0 < D; d0 += kBlock) {
    const int64_t d1 = std::min(D, d0 + kBlock);
    for (int64_t r = 0; r < M; ++r) {
      const T k = keep ? keep[r % B] : T(1);
#pragma omp simd
      for (int64_t d = d0; d < d1; ++d) {
        const T t = k * dx_out[r * D + d];
        dgamma[d] += t * y[r * D + d];
        dy[r * D + d] = t * gamma[d];
      }
    }
  }
}

template <class T>
void layer_scale_forward_ref(T* x_out, const T* x_in, const T* y, const T* keep, const T* gamma, int64_t N, int64_t B,
                             int64_t D) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t d = 0; d < D; ++d) {
        const int64_t i = (n * B + b) * D + d;
        const double k = keep ? double(keep[b]) : 1.0;
        x_out[i] = T(double(x_in[i]) + k * double(gamma[d]) * double(y[i]));
      }
}

template <class T>
void layer_scale_backward_ref(T* dy, T* dgamma, const T* dx_out, const T* y, const T* keep, const T* gamma, int64_t N,
                              int64_t B, int64_t D) {
  for (int64_t d = 0; d < D; ++d) {
    double dg = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t b = 0; b < B; ++b) {
        const int64_t i = (n * B + b) * D + d;
        const double k = keep ? double(keep[b]) : 1.0;
        dg += k * double(dx_out[i]) * double(y[i]);
        dy[i] = T(k * double(gamma[d]) * double(dx_out[i]));
      }
    dgamma[d] += T(dg);
  }
}

#define GMLP_INSTANTIATE(T)                                                                                         \
  template void layer_scale_forward<T>(T*, const T*, const T*, const T*, const T*, int64_t, int64_t, int64_t);      \
  template void layer_scale_backward<T>(T*, T*, const T*, const T*, const T*, const T*, int64_t, int64_t, int64_t); \
  template void layer_scale_forward_ref<T>(T*, const T*, const T*, const T*, const T*, int64_t, int64_t, int64_t);  \
  template void layer_scale_backward_ref<T>(T*, T*, const T*, const T*, const T*, const T*, int64_t, int64_t, int64_t);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
