// Softmax down the columns of a row-major matrix: external attention's softmax over the tokens
// (Guo et al. 2021, §3.2, the first of its double normalisation; MEAttention's
// attn.softmax(dim=-2)) on token-major scores, without transposing. a is (N, cols), one column
// per (image, head, memory unit), cols = B·heads·S:
//   p[n, c] = exp(a[n, c] - max_n a[·, c]) / Σ_m exp(a[m, c] - max_n a[·, c])
#pragma once

#include <cstdint>

namespace gmlp {

// p: (N, cols) overwritten (may alias a); a: (N, cols).
template <class T>
void column_softmax_forward(T* p, const T* a, int64_t N, int64_t cols);

// da (N, cols) overwritten with ∂L/∂a from dp = ∂L/∂p and the forward's output p; may alias dp.
template <class T>
void column_softmax_backward(T* da, const T* dp, const T* p, int64_t N, int64_t cols);

// Plain loops in double, one column at a time; same contracts, no aliasing.
template <class T>
void column_softmax_forward_ref(T* p, const T* a, int64_t N, int64_t cols);
template <class T>
void column_softmax_backward_ref(T* da, const T* dp, const T* p, int64_t N, int64_t cols);

}  // namespace gmlp
