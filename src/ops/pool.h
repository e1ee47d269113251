// Mean over tokens (timm MlpMixer global_pool='avg'): y[b] = (1/N) Σ_n x[n, b].
#pragma once

#include <cstdint>

namespace gmlp {

// y: (B, D) overwritten; x: (N, B, D).
template <class T>
void mean_pool_forward(T* y, const T* x, int64_t N, int64_t B, int64_t D);
// dx (N, B, D) += dy[b] / N.
template <class T>
void mean_pool_backward(T* dx, const T* dy, int64_t N, int64_t B, int64_t D);

}  // namespace gmlp
