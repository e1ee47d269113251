#include "ops/sum_normalize.h"

namespace gmlp {

namespace {
constexpr double kEps = 1e-9;  // MEAttention's
}  // namespace

template <class T>
void sum_normalize_forward(T* r, T* psum, const T* p, int64_t R, int64_t S) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < R; ++i) {
    T s = 0;
    for (int64_t k = 0; k < S; ++k) s += p[i * S + k];
    psum[i] = s;
    const T inv = T(1) / (T(kEps) + s);
    for (int64_t k = 0; k < S; ++k) r[i * S + k] = p[i * S + k] * inv;
  }
}

template <class T>
void sum_normalize_backward(T* dp, const T* dr, const T* r, const T* psum, int64_t R, int64_t S) {
  // fwd: r = p / (ε + Σp)  =>  dp = (dr − Σ_k dr·r) / (ε + Σp)
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < R; ++i) {
    T dot = 0;
    for (int64_t k = 0; k < S; ++k) dot += dr[i * S + k] * r[i * S + k];
    const T inv = T(1) / (T(kEps) + psum[i]);
    for (int64_t k = 0; k < S; ++k) dp[i * S + k] = (dr[i * S + k] - dot) * inv;
  }
}

template <class T>
void sum_normalize_forward_ref(T* r, T* psum, const T* p, int64_t R, int64_t S) {
  for (int64_t i = 0; i < R; ++i) {
    double s = 0;
    for (int64_t k = 0; k < S; ++k) s += double(p[i * S + k]);
    psum[i] = T(s);
    for (int64_t k = 0; k < S; ++k) r[i * S + k] = T(double(p[i * S + k]) / (kEps + s));
  }
}

template <class T>
void sum_normalize_backward_ref(T* dp, const T* dr, const T* p, int64_t R, int64_t S) {
  // The quotient rule: ∂r_j/∂p_k = δ_jk/(ε + s) − p_j/(ε + s)².
  for (int64_t i = 0; i < R; ++i) {
    double s = 0;
    for (int64_t k = 0; k < S; ++k) s += double(p[i * S + k]);
    const double q = kEps + s;
    for (int64_t k = 0; k < S; ++k) {
      double acc = 0;
      for (int64_t j = 0; j < S; ++j) acc += double(dr[i * S + j]) * ((j == k) / q - double(p[i * S + j]) / (q * q));
      dp[i * S + k] = T(acc);
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
