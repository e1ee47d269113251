// Residual add through a layer scale (Touvron et al. 2021, ResMLP §2 and CaiT §3; timm's
// ls1/ls2), with stochastic depth as in ops/residual.h:
//   x_out[n, b] = x_in[n, b] + keep[b] · γ ⊙ y[n, b],   γ (D) learned per channel,
// keep[b] ∈ {0, 1/(1-p)} drawn per sample (drop_path_sample), or nullptr for 1 everywhere.
#pragma once

#include <cstdint>

namespace gmlp {

// x_out: (N, B, D) overwritten (may alias x_in); x_in, y: (N, B, D); keep: (B) or nullptr;
// gamma: (D).
template <class T>
void layer_scale_forward(T* x_out, const T* x_in, const T* y, const T* keep, const T* gamma, int64_t N, int64_t B,
                         int64_t D);

// dy (N, B, D) overwritten with keep[b] · γ ⊙ dx_out (may alias dx_out); dgamma (D) accumulates
// Σ_rows keep[b] · dx_out ⊙ y, from the branch output y that forward scaled. (dx_in += dx_out
// is the caller's identity.)
template <class T>
void layer_scale_backward(T* dy, T* dgamma, const T* dx_out, const T* y, const T* keep, const T* gamma, int64_t N,
                          int64_t B, int64_t D);

// Plain loops, dgamma summed in double; same contracts.
template <class T>
void layer_scale_forward_ref(T* x_out, const T* x_in, const T* y, const T* keep, const T* gamma, int64_t N, int64_t B,
                             int64_t D);
template <class T>
void layer_scale_backward_ref(T* dy, T* dgamma, const T* dx_out, const T* y, const T* keep, const T* gamma, int64_t N,
                              int64_t B, int64_t D);

}  // namespace gmlp
