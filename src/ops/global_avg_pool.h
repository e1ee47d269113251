// Global average pooling over the image, as torch.nn.AdaptiveAvgPool2d(1) then flatten (the
// residual CNN's head): y[b, c] = (1/HW) Σ_i x[b, c, i].
#pragma once

#include <cstdint>

namespace gmlp {

// y (B, C) overwritten with the mean of x (B, C, HW) over HW.
template <class T>
void global_avg_pool_forward(T* y, const T* x, int64_t B, int64_t C, int64_t HW);
// dx (B, C, HW) overwritten with dy[b, c] / HW.
template <class T>
void global_avg_pool_backward(T* dx, const T* dy, int64_t B, int64_t C, int64_t HW);

}  // namespace gmlp
