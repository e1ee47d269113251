// Layer normalisation over the last C channels of each row (torch.nn.LayerNorm(C, eps)):
//   y = (x - mean) · rstd · γ + β,   rstd = 1/sqrt(var + eps),  var biased (divides by C).
// Rows may be strided (ldx, ldy ≥ C), so the gate can normalise the second half of its input
// in place of a copy.
#pragma once

#include <cstdint>

namespace gmlp {

// y: (M, C) at stride ldy, overwritten; mean, rstd: (M) saved for backward.
template <class T>
void layernorm_forward(T* y, int64_t ldy, T* mean, T* rstd, const T* x, int64_t ldx,
                       const T* gamma, const T* beta, int64_t M, int64_t C, T eps);

// Accumulates: dx += ∂L/∂x, dgamma += Σ dy·x̂, dbeta += Σ dy. With overwrite_dx, dx = ∂L/∂x.
template <class T>
void layernorm_backward(T* dx, int64_t lddx, T* dgamma, T* dbeta, const T* dy, int64_t lddy,
                        const T* x, int64_t ldx, const T* mean, const T* rstd, const T* gamma,
                        int64_t M, int64_t C, bool overwrite_dx = false);

template <class T>
void layernorm_forward_ref(T* y, int64_t ldy, T* mean, T* rstd, const T* x, int64_t ldx,
                           const T* gamma, const T* beta, int64_t M, int64_t C, T eps);
template <class T>
void layernorm_backward_ref(T* dx, int64_t lddx, T* dgamma, T* dbeta, const T* dy, int64_t lddy,
                            const T* x, int64_t ldx, const T* mean, const T* rstd,
                            const T* gamma, int64_t M, int64_t C);

}  // namespace gmlp
