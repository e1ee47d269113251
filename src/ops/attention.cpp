#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/fast_math.h"
#include "core/matmul.h"

namespace gmlp {

namespace {

// The (b, h) pairs run in parallel, each pair's products single-threaded inside the region
// (matmul keeps per-thread state, so this holds in bf16 too).

// Where one (b, h) pair's matrices start, and their row strides.
struct Views {
  int64_t W, ldqkv, ldo;
  Views(const AttnShape& s) : W(s.width()), ldqkv(s.B * 3 * s.width()), ldo(s.B * s.width()) {}
  int64_t q(const AttnShape& s, int64_t b, int64_t h) const { return b * 3 * W + h * s.dh; }
  int64_t o(const AttnShape& s, int64_t b, int64_t h) const { return b * W + h * s.dh; }
};

}  // namespace

template <class T>
void attention_forward(OutputOf<T> o, T* P, OperandOf<T> qkv, AttnShape s, const T* bias, const T* key_bias) {
  const int64_t N = s.N, dh = s.dh, pairs = s.B * s.heads;
  const Views v(s);
  const T scale = T(1) / std::sqrt(T(dh));
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < pairs; ++bh) {
    const int64_t b = bh / s.heads, h = bh % s.heads;
    const Operand<T> Q = qkv.from(v.q(s, b, h)), K = Q.from(v.W), V = Q.from(2 * v.W);
    T* Pbh = P + bh * N * N;
    matmul<T>(false, true, N, N, dh, Q, v.ldqkv, K, v.ldqkv, T(0), Pbh, N);  // Q Kᵀ (unscaled)
    for (int64_t i = 0; i < N; ++i) {
      T* p = Pbh + i * N;
      const T* bi = bias ? bias + (h * N + i) * N : nullptr;
      const T* kb = key_bias ? key_bias + b * N : nullptr;
#pragma omp simd
      for (int64_t j = 0; j < N; ++j) p[j] = p[j] * scale + (bi ? bi[j] : T(0)) + (kb ? kb[j] : T(0));
      T mx = p[0];
      for (int64_t j = 1; j < N; ++j) mx = std::max(mx, p[j]);
      T sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < N; ++j) {
        p[j] = exp_nonpositive(p[j] - mx);
        sum += p[j];
      }
      const T inv = T(1) / sum;
#pragma omp simd
      for (int64_t j = 0; j < N; ++j) p[j] *= inv;
    }
    matmul<T>(false, false, N, dh, N, Pbh, N, V, v.ldqkv, T(0), o.from(v.o(s, b, h)), v.ldo);
  }
}

template <class T>
void attention_backward(T* dqkv, const T* dout, OperandOf<T> qkv, const T* P, AttnShape s, T* scratch, T* dbias) {
  const int64_t N = s.N, dh = s.dh, pairs = s.B * s.heads;
  const Views v(s);
  const T scale = T(1) / std::sqrt(T(dh));
  // Each pair overwrites its own dh columns of dq, dk and dv in its batch item's rows: together
  // the pairs cover all of dqkv exactly once. Phase 1: dV, and dS (the score gradient) in scratch.
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < pairs; ++bh) {
    const int64_t b = bh / s.heads, h = bh % s.heads;
    const int64_t qoff = v.q(s, b, h);
    const Operand<T> V = qkv.from(qoff + 2 * v.W);
    T* dV = dqkv + qoff + 2 * v.W;
    const T* dO = dout + v.o(s, b, h);
    const T* Pbh = P + bh * N * N;
    T* dS = scratch + bh * N * N;
    // fwd: O = P V  =>  dP = dO Vᵀ,  dV = Pᵀ dO
    matmul<T>(false, true, N, N, dh, dO, v.ldo, V, v.ldqkv, T(0), dS, N);
    matmul<T>(true, false, N, dh, N, Pbh, N, dO, v.ldo, T(0), dV, v.ldqkv);
    // fwd: P = softmax(S) by rows  =>  dS = P ⊙ (dP − rowsum(dP ⊙ P))
    for (int64_t i = 0; i < N; ++i) {
      T* d = dS + i * N;
      const T* p = Pbh + i * N;
      T c = 0;
#pragma omp simd reduction(+ : c)
      for (int64_t j = 0; j < N; ++j) c += d[j] * p[j];
#pragma omp simd
      for (int64_t j = 0; j < N; ++j) d[j] = p[j] * (d[j] - c);
    }
  }
  // The bias is shared by the batch: its gradient sums dS over b (in b order, deterministic).
  if (dbias) {
    const int64_t HNN = s.heads * N * N;
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < HNN; ++e) {
      T acc = 0;
      for (int64_t b = 0; b < s.B; ++b) acc += scratch[b * HNN + e];
      dbias[e] += acc;
    }
  }
  // Phase 2. fwd: S = Q Kᵀ·scale  =>  dQ = dS K·scale,  dK = dSᵀ Q·scale (scale folded into dS).
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < pairs; ++bh) {
    const int64_t b = bh / s.heads, h = bh % s.heads;
    const int64_t qoff = v.q(s, b, h);
    const Operand<T> Q = qkv.from(qoff), K = Q.from(v.W);
    T* dQ = dqkv + qoff;
    T* dK = dQ + v.W;
    T* dS = scratch + bh * N * N;
#pragma omp simd
    for (int64_t e = 0; e < N * N; ++e) dS[e] *= scale;
    matmul<T>(false, false, N, dh, N, dS, N, K, v.ldqkv, T(0), dQ, v.ldqkv);
    matmul<T>(true, false, N, dh, N, dS, N, Q, v.ldqkv, T(0), dK, v.ldqkv);
  }
}

namespace {
// Index of element (token n, batch b, column c) of a token-major (N, B, cols) tensor.
inline int64_t at(const AttnShape& s, int64_t cols, int64_t n, int64_t b, int64_t c) {
  return (n * s.B + b) * cols + c;
}

// The reference's probabilities for one (b, h): P[i·N + j], query i, key j.
template <class T>
std::vector<double> ref_probs(const T* qkv, AttnShape s, int64_t b, int64_t h, const T* bias, const T* key_bias) {
  const int64_t N = s.N, W = s.width(), C = 3 * W;
  const double scale = 1.0 / std::sqrt(double(s.dh));
  std::vector<double> P(N * N);
  for (int64_t i = 0; i < N; ++i) {
    double mx = -INFINITY;
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t d = 0; d < s.dh; ++d)
        acc += double(qkv[at(s, C, i, b, h * s.dh + d)]) * double(qkv[at(s, C, j, b, W + h * s.dh + d)]);
      P[i * N + j] = acc * scale + (bias ? double(bias[(h * N + i) * N + j]) : 0.0) +
                     (key_bias ? double(key_bias[b * N + j]) : 0.0);
      mx = std::max(mx, P[i * N + j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < N; ++j) sum += P[i * N + j] = std::exp(P[i * N + j] - mx);
    for (int64_t j = 0; j < N; ++j) P[i * N + j] /= sum;
  }
  return P;
}
}  // namespace

template <class T>
void attention_forward_ref(T* o, const T* qkv, AttnShape s, const T* bias, const T* key_bias) {
  const int64_t N = s.N, W = s.width(), C = 3 * W;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      const std::vector<double> P = ref_probs(qkv, s, b, h, bias, key_bias);
      for (int64_t i = 0; i < N; ++i)
        for (int64_t d = 0; d < s.dh; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < N; ++j) acc += P[i * N + j] * double(qkv[at(s, C, j, b, 2 * W + h * s.dh + d)]);
          o[at(s, W, i, b, h * s.dh + d)] = T(acc);
        }
    }
}

template <class T>
void attention_backward_ref(T* dqkv, const T* dout, const T* qkv, AttnShape s, const T* bias, T* dbias,
                            const T* key_bias) {
  const int64_t N = s.N, W = s.width(), C = 3 * W, dh = s.dh;
  const double scale = 1.0 / std::sqrt(double(dh));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      const std::vector<double> P = ref_probs(qkv, s, b, h, bias, key_bias);
      auto q = [&](int64_t n, int64_t d) { return double(qkv[at(s, C, n, b, h * dh + d)]); };
      auto k = [&](int64_t n, int64_t d) { return double(qkv[at(s, C, n, b, W + h * dh + d)]); };
      auto vv = [&](int64_t n, int64_t d) { return double(qkv[at(s, C, n, b, 2 * W + h * dh + d)]); };
      auto dO = [&](int64_t n, int64_t d) { return double(dout[at(s, W, n, b, h * dh + d)]); };
      // dP[i][j] = Σ_d dO[i][d] V[j][d];  dS = P ⊙ (dP − Σ_j dP ⊙ P)
      std::vector<double> dS(N * N);
      for (int64_t i = 0; i < N; ++i) {
        double c = 0;
        for (int64_t j = 0; j < N; ++j) {
          double dp = 0;
          for (int64_t d = 0; d < dh; ++d) dp += dO(i, d) * vv(j, d);
          dS[i * N + j] = dp;
          c += dp * P[i * N + j];
        }
        for (int64_t j = 0; j < N; ++j) dS[i * N + j] = P[i * N + j] * (dS[i * N + j] - c);
      }
      if (dbias)
        for (int64_t e = 0; e < N * N; ++e) dbias[h * N * N + e] += T(dS[e]);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t d = 0; d < dh; ++d) {
          double dq = 0, dk = 0, dv = 0;
          for (int64_t m = 0; m < N; ++m) {
            dq += dS[n * N + m] * k(m, d) * scale;  // S[n][m] = scale Σ q[n]·k[m]
            dk += dS[m * N + n] * q(m, d) * scale;  // S[m][n] = scale Σ q[m]·k[n]
            dv += P[m * N + n] * dO(m, d);          // O[m] = Σ_n P[m][n] v[n]
          }
          dqkv[at(s, C, n, b, h * dh + d)] = T(dq);
          dqkv[at(s, C, n, b, W + h * dh + d)] = T(dk);
          dqkv[at(s, C, n, b, 2 * W + h * dh + d)] = T(dv);
        }
    }
}

#define GMLP_INSTANTIATE(T)                                                                     \
  template void attention_forward<T>(Output<T>, T*, Operand<T>, AttnShape, const T*, const T*); \
  template void attention_backward<T>(T*, const T*, Operand<T>, const T*, AttnShape, T*, T*);   \
  template void attention_forward_ref<T>(T*, const T*, AttnShape, const T*, const T*);          \
  template void attention_backward_ref<T>(T*, const T*, const T*, AttnShape, const T*, T*, const T*);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
