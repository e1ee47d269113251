// Fully connected layer, as torch.nn.Linear: y = x·Wᵀ + b with W stored (out, in).
// Rows are independent, so x may hold tokens of any layout; matrix products go through matmul().
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/operand.h"
#include "core/threads.h"
#include "core/write.h"

namespace gmlp {

// What a layer applies to its output, fused into the product (gemm::Epilogue).
enum class Activation { none, gelu };

// y: (M, out) overwritten; x: (M, in); W: (out, in); b: (out) or nullptr. The bias, and with
// act = gelu the activation, are applied by the product to each block of its output while the
// block is in cache: with gelu, y = GELU(x·Wᵀ + b), the same bits as gelu_forward after the
// layer, and slope (M, out), when given (training), receives GELU's derivative there, from the
// same erf: what backward multiplies by (linear_backward, gelu_backward_by_slope); with
// slope_bf16, as bfloat16 (gelu_slope_bf16()). x may be stored as bf16 (core/operand.h). With
// add (M, out) and no activation, y = add + (x·Wᵀ + b): a residual connection's sum, made in the
// same pass, with the bits of adding afterwards (residual_forward). y may be stored as bf16
// (core/operand.h's Output): the bits store_bf16 gives on the float y.
template <class T>
void linear_forward(OutputOf<T> y, OperandOf<T> x, const T* W, const T* b, int64_t M, int64_t in, int64_t out,
                    Activation act = Activation::none, T* slope = nullptr, bool slope_bf16 = false,
                    const T* add = nullptr);

// Accumulates: dx += dy·W (skipped when dx is nullptr), dW += dyᵀ·x, db += Σ_rows dy.
// With Write::overwrite, dx = dy·W instead (saves zeroing a fresh buffer). With act = gelu (and
// dx overwritten), x being GELU(z) and slope GELU'(z) (linear_forward's): dx = (dy·W) ⊙ slope,
// the gradient of the activation's input, fused into the product (the same bits as
// gelu_backward_inplace after it, for a float slope; slope_bf16 as linear_forward's). dy and x may
// be stored as bf16 (core/operand.h); db, which sums dy's rows, needs dy as floats (else nullptr:
// the op that made dy sums it, as sgu_backward does).
template <class T>
void linear_backward(T* dx, T* dW, T* db, OperandOf<T> dy, OperandOf<T> x, const T* W, int64_t M, int64_t in,
                     int64_t out, Write dx_write = Write::accumulate, Activation act = Activation::none,
                     const T* slope = nullptr, bool slope_bf16 = false);

// The same layer over tokens, for the token-mixing layers that multiply the batch as one matrix
// (MLP-Mixer's token MLP, ResMLP's linear over tokens, the feed-forward-only model):
// y = W·x + b with one bias per output row, broadcast along it (ops/row_bias.h), the bias, GELU
// with its slope, and a residual's sum applied by the product as linear_forward's are.
// y, slope: (out, C) overwritten; add: (out, C); x: (in, C); x and y may be stored as bf16;
// W: (out, in); b: (out).
template <class T>
void token_linear_forward(OutputOf<T> y, OperandOf<T> x, const T* W, const T* b, int64_t in, int64_t out, int64_t C,
                          Activation act = Activation::none, T* slope = nullptr, bool slope_bf16 = false,
                          const T* add = nullptr);
// Accumulates dW += dy·xᵀ and db += Σ_c dy (row_bias_backward's bits); dx = Wᵀ·dy overwritten
// (skipped when nullptr), or with act = gelu, x being GELU(z) and slope GELU'(z)
// (token_linear_forward's), dx = (Wᵀ·dy) ⊙ slope, fused into the product.
template <class T>
void token_linear_backward(T* dx, T* dW, T* db, const T* dy, OperandOf<T> x, const T* W, int64_t in, int64_t out,
                           int64_t C, Activation act = Activation::none, const T* slope = nullptr,
                           bool slope_bf16 = false);

// Plain loops, the reference the fast versions are held to.
template <class T>
void linear_forward_ref(T* y, const T* x, const T* W, const T* b, int64_t M, int64_t in, int64_t out);
template <class T>
void linear_backward_ref(T* dx, T* dW, T* db, const T* dy, const T* x, const T* W, int64_t M, int64_t in, int64_t out);

// db (C) += Σ over M rows of dy (M, C), rows ldy apart. Shared by every op with a bias.
template <class T>
void column_sum_add(T* db, const T* dy, int64_t ldy, int64_t M, int64_t C);

// Calls row(i, acc) for every row i of [0, M), the rows in one contiguous block per thread (one
// block below 2^15 elements), where acc is the block's own C partial sums for row to add into
// (zeroed first; nullptr when db is), then adds the partials into db in block order: the same
// bits for the same thread count. The order of column_sum_add, for ops that sum a bias gradient
// in a pass of their own (gelu_backward_by_slope).
template <class T, class Row>
void for_rows_summing_columns(T* db, int64_t M, int64_t C, const Row& row) {
  const int64_t parts = M * C < (int64_t(1) << 15) ? 1 : omp_get_max_threads();
  thread_local std::vector<T> partial;  // room for every thread's, whatever `parts` this call takes
  if (db && partial.size() < size_t(omp_get_max_threads() * C)) partial.resize(size_t(omp_get_max_threads() * C));
  T* const partials = partial.data();  // the calling thread's buffer (thread_local: name it here)
  parallel_for_if(parts > 1, parts, [&](int64_t p) {
    T* acc = db ? partials + p * C : nullptr;
    if (acc) std::fill(acc, acc + C, T(0));
    for (int64_t i = M * p / parts; i < M * (p + 1) / parts; ++i) row(i, acc);
  });
  for (int64_t p = 0; db && p < parts; ++p) {
    const T* acc = partials + p * C;
#pragma omp simd
    for (int64_t j = 0; j < C; ++j) db[j] += acc[j];
  }
}

}  // namespace gmlp
