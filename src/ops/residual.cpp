#include "ops/residual.h"

namespace gmlp {

template <class T>
void drop_path_sample(T* keep, int64_t B, double drop_prob, Rng& rng) {
  const T scale = T(1.0 / (1.0 - drop_prob));
  for (int64_t b = 0; b < B; ++b) keep[b] = rng.uniform() < drop_prob ? T(0) : scale;
}

template <class T>
void residual_forward(T* x_out, const T* x_in, const T* y, const T* keep, int64_t N, int64_t B, int64_t D) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < B; ++b) {
      const T k = keep ? keep[b] : T(1);
      const int64_t o = (n * B + b) * D;
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) x_out[o + d] = x_in[o + d] + k * y[o + d];
    }
}

template <class T>
void residual_backward(T* dy, const T* dx_out, const T* keep, int64_t N, int64_t B, int64_t D) {
  // fwd: x_out = x_in + keep·y  =>  dy = keep·dx_out
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < B; ++b) {
      const T k = keep ? keep[b] : T(1);
      const int64_t o = (n * B + b) * D;
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) dy[o + d] = k * dx_out[o + d];
    }
}

template void drop_path_sample<float>(float*, int64_t, double, Rng&);
template void drop_path_sample<double>(double*, int64_t, double, Rng&);
template void residual_forward<float>(float*, const float*, const float*, const float*, int64_t, int64_t, int64_t);
template void residual_forward<double>(double*, const double*, const double*, const double*, int64_t, int64_t, int64_t);
template void residual_backward<float>(float*, const float*, const float*, int64_t, int64_t, int64_t);
template void residual_backward<double>(double*, const double*, const double*, int64_t, int64_t, int64_t);

}  // namespace gmlp
