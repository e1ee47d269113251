// ResMLP's Affine normalisation (Touvron et al. 2021, §2; timm's resmlp Affine), per channel:
//   y = α ⊙ x + β   on every row of D channels.
#pragma once

#include <cstdint>

namespace gmlp {

// y: (M, D) overwritten (may alias x); x: (M, D), M = N·B rows; alpha, beta: (D).
template <class T>
void affine_forward(T* y, const T* x, const T* alpha, const T* beta, int64_t M, int64_t D);

// Accumulates: dx (M, D) += α ⊙ dy;  dalpha (D) += Σ_rows dy ⊙ x;  dbeta (D) += Σ_rows dy.
template <class T>
void affine_backward(T* dx, T* dalpha, T* dbeta, const T* dy, const T* x, const T* alpha, int64_t M, int64_t D);

// Plain loops, the parameter gradients summed in double; same contracts.
template <class T>
void affine_forward_ref(T* y, const T* x, const T* alpha, const T* beta, int64_t M, int64_t D);
template <class T>
void affine_backward_ref(T* dx, T* dalpha, T* dbeta, const T* dy, const T* x, const T* alpha, int64_t M, int64_t D);

}  // namespace gmlp
