#include "ops/affine.h"

#include <algorithm>

namespace gmlp {

template <class T>
void affine_forward(T* y, const T* x, const T* alpha, const T* beta, int64_t M, int64_t D) {
  // x, y: (M, D)
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < M; ++r)
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) y[r * D + d] = alpha[d] * x[r * D + d] + beta[d];
}

template <class T>
void affine_backward(T* dx, T* dalpha, T* dbeta, const T* dy, const T* x, const T* alpha, int64_t M, int64_t D) {
  // fwd: y = α ⊙ x + β  =>  dx += α ⊙ dy;  dα += Σ dy ⊙ x;  dβ += Σ dy
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < M; ++r)
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) dx[r * D + d] += alpha[d] * dy[r * D + d];
  // dα, dβ: column sums in row order, blocked by cache line so each thread owns its outputs
  // (every element adds its rows in the same order for any thread count).
  constexpr int64_t kBlock = 64 / sizeof(T);
#pragma omp parallel for schedule(static)
  for (int64_t d0 = 0; d0 < D; d0 += kBlock) {
    const int64_t d1 = std::min(D, d0 + kBlock);
    for (int64_t r = 0; r < M; ++r)
#pragma omp simd
      for (int64_t d = d0; d < d1; ++d) {
        dalpha[d] += dy[r * D + d] * x[r * D + d];
        dbeta[d] += dy[r * D + d];
      }
  }
}

template <class T>
void affine_forward_ref(T* y, const T* x, const T* alpha, const T* beta, int64_t M, int64_t D) {
  for (int64_t r = 0; r < M; ++r)
    for (int64_t d = 0; d < D; ++d) y[r * D + d] = T(double(alpha[d]) * double(x[r * D + d]) + double(beta[d]));
}

template <class T>
void affine_backward_ref(T* dx, T* dalpha, T* dbeta, const T* dy, const T* x, const T* alpha, int64_t M, int64_t D) {
  for (int64_t d = 0; d < D; ++d) {
    double da = 0, db = 0;
    for (int64_t r = 0; r < M; ++r) {
      dx[r * D + d] += T(double(alpha[d]) * double(dy[r * D + d]));
      da += double(dy[r * D + d]) * double(x[r * D + d]);
      db += double(dy[r * D + d]);
    }
    dalpha[d] += T(da);
    dbeta[d] += T(db);
  }
}

#define GMLP_INSTANTIATE(T)                                                                     \
  template void affine_forward<T>(T*, const T*, const T*, const T*, int64_t, int64_t);          \
  template void affine_backward<T>(T*, T*, T*, const T*, const T*, const T*, int64_t, int64_t); \
  template void affine_forward_ref<T>(T*, const T*, const T*, const T*, int64_t, int64_t);      \
  template void affine_backward_ref<T>(T*, T*, T*, const T*, const T*, const T*, int64_t, int64_t);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
