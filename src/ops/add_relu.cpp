#include "ops/add_relu.h"

#include <cmath>

namespace gmlp {

template <class T>
void add_relu_forward(T* out, const T* a, const T* b, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T v = a[i] + b[i];
    out[i] = v < T(0) ? T(0) : v;  // NaN propagates, as torch.relu
  }
}

template <class T>
void add_relu_backward(T* dsum, const T* dout, const T* out, int64_t n) {
  // fwd: out = max(a + b, 0)  =>  da = db = dout·[out > 0]
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dsum[i] = out[i] > T(0) ? dout[i] : T(0);
}

template <class T>
void add_relu_forward_ref(T* out, const T* a, const T* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const T v = a[i] + b[i];
    out[i] = std::isnan(v) ? v : (v > T(0) ? v : T(0));
  }
}

template <class T>
void add_relu_backward_ref(T* dsum, const T* dout, const T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dsum[i] = out[i] > T(0) ? dout[i] : T(0);
}

#define GMLP_INSTANTIATE(T)                                               \
  template void add_relu_forward<T>(T*, const T*, const T*, int64_t);     \
  template void add_relu_backward<T>(T*, const T*, const T*, int64_t);    \
  template void add_relu_forward_ref<T>(T*, const T*, const T*, int64_t); \
  template void add_relu_backward_ref<T>(T*, const T*, const T*, int64_t);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
