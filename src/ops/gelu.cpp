#include "ops/gelu.h"

#include <cmath>

namespace gmlp {

namespace {
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
}  // namespace

template <class T>
void gelu_forward(T* y, const T* x, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = T(0.5) * x[i] * (T(1) + std::erf(x[i] * T(kInvSqrt2)));
}

template <class T>
void gelu_backward(T* dx, const T* dy, const T* x, int64_t n) {
  // fwd: y = x·Φ(x)  =>  dx += dy·(Φ(x) + x·φ(x))
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T cdf = T(0.5) * (T(1) + std::erf(x[i] * T(kInvSqrt2)));
    const T pdf = T(kInvSqrt2Pi) * std::exp(T(-0.5) * x[i] * x[i]);
    dx[i] += dy[i] * (cdf + x[i] * pdf);
  }
}

template <class T>
void gelu_forward_ref(T* y, const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = T(0.5 * x[i] * (1.0 + std::erf(x[i] * kInvSqrt2)));
}

template <class T>
void gelu_backward_ref(T* dx, const T* dy, const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double xi = x[i];
    const double d = 0.5 * (1.0 + std::erf(xi * kInvSqrt2)) + xi * kInvSqrt2Pi * std::exp(-0.5 * xi * xi);
    dx[i] += T(dy[i] * d);
  }
}

#define GMLP_INSTANTIATE(T)                                                \
  template void gelu_forward<T>(T*, const T*, int64_t);                    \
  template void gelu_backward<T>(T*, const T*, const T*, int64_t);         \
  template void gelu_forward_ref<T>(T*, const T*, int64_t);                \
  template void gelu_backward_ref<T>(T*, const T*, const T*, int64_t);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
