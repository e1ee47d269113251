// The residual CNN's block output (torchvision BasicBlock: out += identity; relu(out)): a sum of
// two branches through a ReLU, in one pass:
//   out = max(a + b, 0)
#pragma once

#include <cstdint>

namespace gmlp {

// out (n) overwritten; may alias a or b.
template <class T>
void add_relu_forward(T* out, const T* a, const T* b, int64_t n);

// dsum (n) overwritten with dout · [out > 0]: ∂L/∂a and ∂L/∂b alike, from the forward's output;
// may alias dout.
template <class T>
void add_relu_backward(T* dsum, const T* dout, const T* out, int64_t n);

// Plain loops; same contracts.
template <class T>
void add_relu_forward_ref(T* out, const T* a, const T* b, int64_t n);
template <class T>
void add_relu_backward_ref(T* dsum, const T* dout, const T* out, int64_t n);

}  // namespace gmlp
