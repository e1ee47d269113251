#include "ops/sgu.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/matmul.h"
#include "ops/layernorm.h"

namespace gmlp {

SguGate parse_sgu_gate(const char* name) {
  for (auto [n, g] : {std::pair{"split", SguGate::split}, {"multiplicative", SguGate::multiplicative},
                      {"additive", SguGate::additive}, {"linear", SguGate::linear}})
    if (std::strcmp(name, n) == 0) return g;
  fail("unknown gate '", name, "': expected split, multiplicative, additive or linear");
}

namespace {
// Where v (the normalised, token-mixed part) starts in each row of z, and the gate's use of u.
int64_t v_offset(const SguShape& s) { return s.gate == SguGate::split ? s.F / 2 : 0; }
}  // namespace

template <class T>
void sgu_forward(T* out, T* vn, T* mean, T* rstd, T* g, const T* z, const T* gamma, const T* beta,
                 const T* W, const T* b, SguShape s, T eps, const T* res) {
  const int64_t H = s.H(), F = s.F, M = s.rows(), BH = s.B * H;
  const SguGate gate = s.gate;
  layernorm_forward(vn, H, mean, rstd, z + v_offset(s), F, gamma, beta, M, H, eps);
  matmul<T>(false, false, s.N, BH, s.N, W, s.N, vn, BH, T(0), g, BH);  // g = W·v̂
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < M; ++r) {
    const T bias = b[r / s.B];
    T* gr = g + r * H;
    const T* ur = z + r * F;
    const T* rr = res ? res + r * H : nullptr;
    T* orow = out + r * H;
    if (rr) {
#pragma omp simd
      for (int64_t h = 0; h < H; ++h) gr[h] += rr[h];
    }
    switch (gate) {
      case SguGate::split:
      case SguGate::multiplicative:
#pragma omp simd
        for (int64_t h = 0; h < H; ++h) {
          gr[h] += bias;
          orow[h] = ur[h] * gr[h];
        }
        break;
      case SguGate::additive:
#pragma omp simd
        for (int64_t h = 0; h < H; ++h) {
          gr[h] += bias;
          orow[h] = ur[h] + gr[h];
        }
        break;
      case SguGate::linear:
#pragma omp simd
        for (int64_t h = 0; h < H; ++h) {
          gr[h] += bias;
          orow[h] = gr[h];
        }
        break;
    }
  }
}

template <class T>
void sgu_backward(T* dz, T* dgamma, T* dbeta, T* dW, T* db, const T* dout, const T* z,
                  const T* vn, const T* mean, const T* rstd, const T* g, const T* gamma,
                  const T* W, SguShape s, T* scratch, T* dres) {
  const int64_t H = s.H(), F = s.F, M = s.rows(), BH = s.B * H;
  const SguGate gate = s.gate;
  T* dg = dres ? dres : scratch;  // (N, B, H)
  T* dvn = scratch + M * H;       // (N, B, H)
  // fwd: out = u ⊙ g  =>  du = dout·g, dg = dout·u;   out = u + g  =>  du = dg = dout;
  //      out = g  =>  du = 0, dg = dout.  (u is z's first H channels.)
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < M; ++r) {
    T* dzr = dz + r * F;
    T* dgr = dg + r * H;
    const T* dor = dout + r * H;
    const T* gr = g + r * H;
    const T* ur = z + r * F;
    switch (gate) {
      case SguGate::split:
      case SguGate::multiplicative:
#pragma omp simd
        for (int64_t h = 0; h < H; ++h) {
          dzr[h] = dor[h] * gr[h];
          dgr[h] = dor[h] * ur[h];
        }
        break;
      case SguGate::additive:
#pragma omp simd
        for (int64_t h = 0; h < H; ++h) dzr[h] = dgr[h] = dor[h];
        break;
      case SguGate::linear:
#pragma omp simd
        for (int64_t h = 0; h < H; ++h) {
          dzr[h] = 0;
          dgr[h] = dor[h];
        }
        break;
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
  // fwd: v̂ = LayerNorm(v). With the split, v is z's second half (a fresh gradient); otherwise
  // v is all of z and its gradient adds to u's.
  layernorm_backward(dz + v_offset(s), F, dgamma, dbeta, dvn, H, z + v_offset(s), F, mean, rstd,
                     gamma, M, H, gate == SguGate::split);
}

namespace {
// The reference's gate value and how it combines with u, one element at a time.
template <class T>
double ref_gate(const T* W, const T* b, const std::vector<T>& vn, const T* res, SguShape s,
                int64_t n, int64_t bb, int64_t h) {
  const int64_t H = s.H();
  double gate = b[n];
  for (int64_t m = 0; m < s.N; ++m) gate += double(W[n * s.N + m]) * vn[(m * s.B + bb) * H + h];
  if (res) gate += res[(n * s.B + bb) * H + h];
  return gate;
}
}  // namespace

template <class T>
void sgu_forward_ref(T* out, const T* z, const T* gamma, const T* beta, const T* W, const T* b,
                     SguShape s, T eps, const T* res) {
  const int64_t H = s.H(), M = s.rows();
  std::vector<T> vn(M * H), mean(M), rstd(M);
  layernorm_forward_ref(vn.data(), H, mean.data(), rstd.data(), z + v_offset(s), s.F, gamma, beta,
                        M, H, eps);
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t bb = 0; bb < s.B; ++bb)
      for (int64_t h = 0; h < H; ++h) {
        const double gate = ref_gate(W, b, vn, res, s, n, bb, h);
        const double u = z[(n * s.B + bb) * s.F + h];
        double o = gate;
        if (s.gate == SguGate::split || s.gate == SguGate::multiplicative) o = u * gate;
        if (s.gate == SguGate::additive) o = u + gate;
        out[(n * s.B + bb) * H + h] = T(o);
      }
}

template <class T>
void sgu_backward_ref(T* dz, T* dgamma, T* dbeta, T* dW, T* db, const T* dout, const T* z,
                      const T* gamma, const T* beta, const T* W, const T* b, SguShape s, T eps,
                      const T* res, T* dres) {
  const int64_t H = s.H(), M = s.rows(), N = s.N, B = s.B, F = s.F;
  std::vector<T> vn(M * H), mean(M), rstd(M), dvn(M * H, T(0));
  layernorm_forward_ref(vn.data(), H, mean.data(), rstd.data(), z + v_offset(s), F, gamma, beta,
                        M, H, eps);
  for (int64_t i = 0; i < M * F; ++i) dz[i] = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t bb = 0; bb < B; ++bb)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t r = n * B + bb;
        const double gate = ref_gate(W, b, vn, res, s, n, bb, h);
        const double d = dout[r * H + h], u = z[r * F + h];
        double du = 0, dgate = d;
        if (s.gate == SguGate::split || s.gate == SguGate::multiplicative) du = d * gate, dgate = d * u;
        if (s.gate == SguGate::additive) du = d;
        dz[r * F + h] += T(du);
        if (dres) dres[r * H + h] = T(dgate);
        db[n] += T(dgate);
        for (int64_t m = 0; m < N; ++m) {
          dW[n * N + m] += T(dgate * vn[(m * B + bb) * H + h]);
          dvn[(m * B + bb) * H + h] += T(dgate * W[n * N + m]);
        }
      }
  layernorm_backward_ref(dz + v_offset(s), F, dgamma, dbeta, dvn.data(), H, z + v_offset(s), F,
                         mean.data(), rstd.data(), gamma, M, H);
}

#define GMLP_INSTANTIATE(T)                                                                       \
  template void sgu_forward<T>(T*, T*, T*, T*, T*, const T*, const T*, const T*, const T*,         \
                               const T*, SguShape, T, const T*);                                 \
  template void sgu_backward<T>(T*, T*, T*, T*, T*, const T*, const T*, const T*, const T*,        \
                                const T*, const T*, const T*, const T*, SguShape, T*, T*);       \
  template void sgu_forward_ref<T>(T*, const T*, const T*, const T*, const T*, const T*, SguShape, \
                                   T, const T*);                                                 \
  template void sgu_backward_ref<T>(T*, T*, T*, T*, T*, const T*, const T*, const T*, const T*,    \
                                    const T*, const T*, SguShape, T, const T*, T*);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
