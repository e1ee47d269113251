#include "ops/relu.h"

namespace gmlp {

template <class T>
void relu_forward(T* y, const T* x, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] < T(0) ? T(0) : x[i];
}

template <class T>
void relu_backward_inplace(T* dy, const T* y, int64_t n) {
  // fwd: y = max(x, 0)  =>  dx = dy·[y > 0], written over dy
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dy[i] = y[i] > T(0) ? dy[i] : T(0);
}

#define GMLP_INSTANTIATE(T)                             \
  template void relu_forward<T>(T*, const T*, int64_t); \
  template void relu_backward_inplace<T>(T*, const T*, int64_t);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
