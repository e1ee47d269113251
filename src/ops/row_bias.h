// A bias per row of a matrix product's output: the token-mixing layers that multiply the batch
// as one (N × B·D) matrix (MLP-Mixer's token MLP, ResMLP's linear over tokens, the
// feed-forward-only model) have one bias per output token, broadcast along the row:
//   y[n, c] += b[n]
// The product adds it to its blocks (token_linear_forward, ops/linear.h); its gradient is a
// pass of its own.
#pragma once

#include <cstdint>

namespace gmlp {

// fwd: y[n, c] += b[n]  =>  db (N) += Σ_c dy[n, c]; dy: (N, cols). (∂L/∂y passes through to
// the product's output unchanged: the caller's identity.)
template <class T>
void row_bias_backward(T* db, const T* dy, int64_t N, int64_t cols);

// Plain loops, the row sums in double. y: (N, cols) += b[n] on every column, cols = B·D; b: (N).
template <class T>
void row_bias_forward_ref(T* y, const T* b, int64_t N, int64_t cols);
template <class T>
void row_bias_backward_ref(T* db, const T* dy, int64_t N, int64_t cols);

}  // namespace gmlp
