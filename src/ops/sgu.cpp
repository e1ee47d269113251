#include "ops/sgu.h"

#include <cmath>
#include <vector>

#include "core/matmul.h"
#include "ops/layernorm.h"

namespace gmlp {

template <class T>
void sgu_forward(T* out, T* vn, T* mean, T* rstd, T* g, const T* z, const T* gamma, const T* beta,
                 const T* W, const T* b, SguShape s, T eps) {
  const int64_t H = s.H(), F = s.F, M = s.rows(), BH = s.B * H;
  layernorm_forward(vn, H, mean, rstd, z + H, F, gamma, beta, M, H, eps);
  matmul<T>(false, false, s.N, BH, s.N, W, s.N, vn, BH, T(0), g, BH);  // g = W·v̂
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < M; ++r) {
    const T bias = b[r / s.B];
    T* gr = g + r * H;
    const T* ur = z + r * F;
    T* orow = out + r * H;
#pragma omp simd
    for (int64_t h = 0; h < H; ++h) {
      gr[h] += bias;
      orow[h] = ur[h] * gr[h];
    }
  }
}

template <class T>
void sgu_backward(T* dz, T* dgamma, T* dbeta, T* dW, T* db, const T* dout, const T* z,
                  const T* vn, const T* mean, const T* rstd, const T* g, const T* gamma,
                  const T* W, SguShape s, T* scratch) {
  const int64_t H = s.H(), F = s.F, M = s.rows(), BH = s.B * H;
  T* dg = scratch;           // (N, B, H)
  T* dvn = scratch + M * H;  // (N, B, H)
  // fwd: out = u ⊙ g  =>  du = dout·g;  dg = dout·u
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < M; ++r) {
#pragma omp simd
    for (int64_t h = 0; h < H; ++h) {
      dz[r * F + h] = dout[r * H + h] * g[r * H + h];
      dg[r * H + h] = dout[r * H + h] * z[r * F + h];
    }
  }
  // fwd: g = W·v̂ + b  =>  db[n] += Σ_{b,h} dg[n];  dW += dg·v̂ᵀ;  dv̂ = Wᵀ·dg
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < s.N; ++n) {
    T acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t j = 0; j < BH; ++j) acc += dg[n * BH + j];
    db[n] += acc;
  }
  matmul<T>(false, true, s.N, s.N, BH, dg, BH, vn, BH, T(1), dW, s.N);
  matmul<T>(true, false, s.N, BH, s.N, W, s.N, dg, BH, T(0), dvn, BH);
  // fwd: v̂ = LayerNorm(v)
  layernorm_backward(dz + H, F, dgamma, dbeta, dvn, H, z + H, F, mean, rstd, gamma, M, H, true);
}

template <class T>
void sgu_forward_ref(T* out, const T* z, const T* gamma, const T* beta, const T* W, const T* b,
                     SguShape s, T eps) {
  const int64_t H = s.H(), M = s.rows();
  std::vector<T> vn(M * H), mean(M), rstd(M);
  layernorm_forward_ref(vn.data(), H, mean.data(), rstd.data(), z + H, s.F, gamma, beta, M, H, eps);
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t bb = 0; bb < s.B; ++bb)
      for (int64_t h = 0; h < H; ++h) {
        double gate = b[n];
        for (int64_t m = 0; m < s.N; ++m) gate += double(W[n * s.N + m]) * vn[(m * s.B + bb) * H + h];
        out[(n * s.B + bb) * H + h] = T(z[(n * s.B + bb) * s.F + h] * gate);
      }
}

template <class T>
void sgu_backward_ref(T* dz, T* dgamma, T* dbeta, T* dW, T* db, const T* dout, const T* z,
                      const T* gamma, const T* beta, const T* W, const T* b, SguShape s, T eps) {
  const int64_t H = s.H(), M = s.rows(), N = s.N, B = s.B, F = s.F;
  std::vector<T> vn(M * H), mean(M), rstd(M), dvn(M * H, T(0));
  layernorm_forward_ref(vn.data(), H, mean.data(), rstd.data(), z + H, F, gamma, beta, M, H, eps);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t bb = 0; bb < B; ++bb)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t r = n * B + bb;
        double gate = b[n];
        for (int64_t m = 0; m < N; ++m) gate += double(W[n * N + m]) * vn[(m * B + bb) * H + h];
        const double d = dout[r * H + h];
        dz[r * F + h] = T(d * gate);
        const double dgate = d * z[r * F + h];
        db[n] += T(dgate);
        for (int64_t m = 0; m < N; ++m) {
          dW[n * N + m] += T(dgate * vn[(m * B + bb) * H + h]);
          dvn[(m * B + bb) * H + h] += T(dgate * W[n * N + m]);
        }
      }
  for (int64_t r = 0; r < M; ++r)
    for (int64_t h = H; h < F; ++h) dz[r * F + h] = 0;
  layernorm_backward_ref(dz + H, F, dgamma, dbeta, dvn.data(), H, z + H, F, mean.data(),
                         rstd.data(), gamma, M, H);
}

#define GMLP_INSTANTIATE(T)                                                                       \
  template void sgu_forward<T>(T*, T*, T*, T*, T*, const T*, const T*, const T*, const T*,         \
                               const T*, SguShape, T);                                           \
  template void sgu_backward<T>(T*, T*, T*, T*, T*, const T*, const T*, const T*, const T*,        \
                                const T*, const T*, const T*, const T*, SguShape, T*);           \
  template void sgu_forward_ref<T>(T*, const T*, const T*, const T*, const T*, const T*, SguShape, \
                                   T);                                                           \
  template void sgu_backward_ref<T>(T*, T*, T*, T*, T*, const T*, const T*, const T*, const T*,    \
                                    const T*, const T*, SguShape, T);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
