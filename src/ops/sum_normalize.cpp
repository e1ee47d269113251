#include "ops/sum_normalize.h"

namespace gmlp {

namespace {
constexpr double kEps = 1e-9;  // MEAttention's
}  // namespace

template <class T>
void sum_normalize_forward(T* r, T* psum, const T* p, int64_t R, int64_t units) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < R; ++i) {
    T s = 0;
    for (int64_t k = 0; k < units; ++k) s += p[i * units + k];
    psum[i] = s;
    const T inv = T(1) / (T(kEps) + s);
    for (int64_t k = 0; k < units; ++k) r[i * units + k] = p[i * units + k] * inv;
  }
}

template <class T>
void sum_normalize_backward(T* dp, const T* dr, const T* r, const T* psum, int64_t R, int64_t units) {
  // fwd: r = p / (ε + Σp)  =>  dp = (dr − Σ_k dr·r) / (ε + Σp)
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < R; ++i) {
    T dot = 0;
    for (int64_t k = 0; k < units; ++k) dot += dr[i * units + k] * r[i * units + k];
    const T inv = T(1) / (T(kEps) + psum[i]);
    for (int64_t k = 0; k < units; ++k) dp[i * units + k] = (dr[i * units + k] - dot) * inv;
  }
}

template <class T>
void sum_normalize_forward_ref(T* r, T* psum, const T* p, int64_t R, int64_t units) {
  for (int64_t i = 0; i < R; ++i) {
    double s = 0;
    for (int64_t k = 0; k < units; ++k) s += double(p[i * units + k]);
    psum[i] = T(s);
    for (int64_t k = 0; k < units; ++k) r[i * units + k] = T(double(p[i * units + k]) / (kEps + s));
  }
}

template <class T>
void sum_normalize_backward_ref(T* dp, const T* dr, const T* p, int64_t R, int64_t units) {
  // The quotient rule: ∂r_j/∂p_k = δ_jk/(ε + s) − p_j/(ε + s)².
  for (int64_t i = 0; i < R; ++i) {
    double s = 0;
    for (int64_t k = 0; k < units; ++k) s += double(p[i * units + k]);
    const double q = kEps + s;
    for (int64_t k = 0; k < units; ++k) {
      double acc = 0;
      for (int64_t j = 0; j < units; ++j)
        acc += double(dr[i * units + j]) * ((j == k) / q - double(p[i * units + j]) / (q * q));
      dp[i * units + k] = T(acc);
    }
  }
}

#define GMLP_INSTANTIATE(T)                                                                    \
  template void sum_normalize_forward<T>(T*, T*, const T*, int64_t, int64_t);                  \
  template void sum_normalize_backward<T>(T*, const T*, const T*, const T*, int64_t, int64_t); \
  template void sum_normalize_forward_ref<T>(T*, T*, const T*, int64_t, int64_t);              \
  template void sum_normalize_backward_ref<T>(T*, const T*, const T*, int64_t, int64_t);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
