// Spatial Gating Unit, split-multiplicative (Liu et al. 2021, eq. 2-3; timm SpatialGatingUnit):
//   z = [u | v] on channels (H = F/2 each);  g = W · LayerNorm(v) + b  over TOKENS;  out = u ⊙ g
// Activations are token-major (N, B, ·), so W·v̂ for the whole batch is one (N×N)·(N×B·H) product
// and so are both of its gradients: no transposes anywhere.
#pragma once

#include <cstdint>

namespace gmlp {

struct SguShape {
  int64_t N, B, F;  // tokens, batch, gate input channels (F = 2H)
  int64_t H() const { return F / 2; }
  int64_t rows() const { return N * B; }
};

// out: (N, B, H) overwritten. Saved for backward: vn = LayerNorm(v) (N, B, H), mean, rstd (N·B),
// g (N, B, H). z: (N, B, F). gamma, beta: (H). W: (N, N) [out token, in token]. b: (N).
template <class T>
void sgu_forward(T* out, T* vn, T* mean, T* rstd, T* g, const T* z, const T* gamma, const T* beta,
                 const T* W, const T* b, SguShape s, T eps);

// Overwrites dz (N, B, F) (a fresh activation gradient: nothing else flows into z); accumulates
// into the parameter gradients dgamma, dbeta (H), dW (N, N), db (N).
// scratch: 2·N·B·H values, overwritten.
template <class T>
void sgu_backward(T* dz, T* dgamma, T* dbeta, T* dW, T* db, const T* dout, const T* z,
                  const T* vn, const T* mean, const T* rstd, const T* g, const T* gamma,
                  const T* W, SguShape s, T* scratch);

// Plain loops over (n, b, h) with the token sum written out; no saved state.
template <class T>
void sgu_forward_ref(T* out, const T* z, const T* gamma, const T* beta, const T* W, const T* b,
                     SguShape s, T eps);
template <class T>
void sgu_backward_ref(T* dz, T* dgamma, T* dbeta, T* dW, T* db, const T* dout, const T* z,
                      const T* gamma, const T* beta, const T* W, const T* b, SguShape s, T eps);

}  // namespace gmlp
