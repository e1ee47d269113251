// Fully connected layer, as torch.nn.Linear: y = x·Wᵀ + b with W stored (out, in).
// Rows are independent, so x may hold tokens of any layout; matrix products go through matmul().
#pragma once

#include <cstdint>

#include "core/write.h"

namespace gmlp {

// y: (M, out) overwritten; x: (M, in); W: (out, in); b: (out) or nullptr.
template <class T>
void linear_forward(T* y, const T* x, const T* W, const T* b, int64_t M, int64_t in, int64_t out);

// Accumulates: dx += dy·W (skipped when dx is nullptr), dW += dyᵀ·x, db += Σ_rows dy.
// With Write::overwrite, dx = dy·W instead (saves zeroing a fresh buffer).
template <class T>
void linear_backward(T* dx, T* dW, T* db, const T* dy, const T* x, const T* W, int64_t M, int64_t in, int64_t out,
                     Write dx_write = Write::accumulate);

// Plain loops, the reference the fast versions are held to.
template <class T>
void linear_forward_ref(T* y, const T* x, const T* W, const T* b, int64_t M, int64_t in, int64_t out);
template <class T>
void linear_backward_ref(T* dx, T* dW, T* db, const T* dy, const T* x, const T* W, int64_t M, int64_t in, int64_t out);

// db (C) += Σ over M rows of dy (M, C), rows ldy apart. Shared by every op with a bias.
template <class T>
void column_sum_add(T* db, const T* dy, int64_t ldy, int64_t M, int64_t C);

}  // namespace gmlp
