// Layer normalisation down the columns of a row-major matrix: the feed-forward-only model's
// LayerNorm(num_tokens) (Melas-Kyriazi 2021) on token-major activations, without transposing.
// x is (N, B·D): each of the B·D columns holds one channel of one image across the N tokens and
// is normalised over them, with a learned γ, β per token:
//   y[n, c] = (x[n, c] - mean_c) · rstd_c · γ[n] + β[n],   rstd = 1/sqrt(var + eps), var biased.
#pragma once

#include <cstdint>

namespace gmlp {

// y: (N, cols) overwritten; mean, rstd: (cols) overwritten, saved for backward; x: (N, cols)
// with cols = B·D; gamma, beta: (N).
template <class T>
void column_layernorm_forward(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta, int64_t N,
                              int64_t cols, T eps);

// dx (N, cols) overwritten with ∂L/∂x (must not alias dy); dgamma, dbeta (N) accumulate.
template <class T>
void column_layernorm_backward(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, const T* mean, const T* rstd,
                               const T* gamma, int64_t N, int64_t cols);

// Plain loops (double accumulation; the backward through the full Jacobian); same contracts.
template <class T>
void column_layernorm_forward_ref(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta, int64_t N,
                                  int64_t cols, T eps);
template <class T>
void column_layernorm_backward_ref(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, const T* mean, const T* rstd,
                                   const T* gamma, int64_t N, int64_t cols);

}  // namespace gmlp
