// Division of each row by its sum: external attention's normalisation over the memory units
// (Guo et al. 2021, §3.2, the second of its double normalisation; MEAttention's
// attn / (1e-9 + attn.sum(dim=-1, keepdim=True))), after the softmax over tokens
// (ops/column_softmax.h). p is (R, units), one row per (token, image, head), `units` memory units:
//   r[i, k] = p[i, k] / (ε + Σ_j p[i, j]),   ε = 1e-9
#pragma once

#include <cstdint>

namespace gmlp {

// r: (R, units) overwritten (may alias p); psum: (R) overwritten with Σ_j p[i, j], saved for
// backward; p: (R, units).
template <class T>
void sum_normalize_forward(T* r, T* psum, const T* p, int64_t R, int64_t units);

// dp (R, units) overwritten with ∂L/∂p from dr = ∂L/∂r, the forward's output r and its psum; may
// alias dr.
template <class T>
void sum_normalize_backward(T* dp, const T* dr, const T* r, const T* psum, int64_t R, int64_t units);

// Plain loops in double; same contracts, no aliasing. The backward recomputes from p.
template <class T>
void sum_normalize_forward_ref(T* r, T* psum, const T* p, int64_t R, int64_t units);
template <class T>
void sum_normalize_backward_ref(T* dp, const T* dr, const T* p, int64_t R, int64_t units);

}  // namespace gmlp
