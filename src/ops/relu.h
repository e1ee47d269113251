// ReLU, as torch.relu: y = max(x, 0), NaN propagating (a diverged activation stays visible).
#pragma once

#include <cstdint>

namespace gmlp {

// y (n) overwritten; may alias x.
template <class T>
void relu_forward(T* y, const T* x, int64_t n);
// fwd: y = max(x, 0)  =>  dy *= [y > 0], in place, from the forward's output y: dy (n) turns from
// ∂L/∂y into ∂L/∂x.
template <class T>
void relu_backward_inplace(T* dy, const T* y, int64_t n);

}  // namespace gmlp
