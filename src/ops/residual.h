// Residual add with stochastic depth (Huang et al. 2016; timm DropPath):
//   x_out[n, b] = x_in[n, b] + keep[b] · y[n, b],  keep[b] ∈ {0, 1/(1-p)} drawn per sample.
// keep == nullptr means every sample keeps its branch with weight 1 (evaluation, or p = 0).
#pragma once

#include <cstdint>

#include "core/rng.h"

namespace gmlp {

// keep: (B) overwritten; one Bernoulli draw per sample from rng.
template <class T>
void drop_path_sample(T* keep, int64_t B, double drop_prob, Rng& rng);

// x_out: (N, B, D) overwritten (may alias x_in).
template <class T>
void residual_forward(T* x_out, const T* x_in, const T* y, const T* keep, int64_t N, int64_t B, int64_t D);
// dy: (N, B, D) overwritten with keep[b] · dx_out. (dx_in += dx_out is the caller's identity.)
template <class T>
void residual_backward(T* dy, const T* dx_out, const T* keep, int64_t N, int64_t B, int64_t D);

}  // namespace gmlp
