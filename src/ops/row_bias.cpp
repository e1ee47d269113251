#include "ops/row_bias.h"

namespace gmlp {

template <class T>
void row_bias_backward(T* db, const T* dy, int64_t N, int64_t cols) {
  // fwd: y[n, c] += b[n]  =>  db[n] += Σ_c dy[n, c]
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    T acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t c = 0; c < cols; ++c) acc += dy[n * cols + c];
    db[n] += acc;
  }
}

template <class T>
void row_bias_forward_ref(T* y, const T* b, int64_t N, int64_t cols) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < cols; ++c) y[n * cols + c] = T(double(y[n * cols + c]) + double(b[n]));
}

template <class T>
void row_bias_backward_ref(T* db, const T* dy, int64_t N, int64_t cols) {
  for (int64_t n = 0; n < N; ++n) {
    double acc = 0;
    for (int64_t c = 0; c < cols; ++c) acc += double(dy[n * cols + c]);
    db[n] += T(acc);
  }
}

#define GMLP_INSTANTIATE(T)                                              \
  template void row_bias_backward<T>(T*, const T*, int64_t, int64_t);    \
  template void row_bias_forward_ref<T>(T*, const T*, int64_t, int64_t); \
  template void row_bias_backward_ref<T>(T*, const T*, int64_t, int64_t);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
