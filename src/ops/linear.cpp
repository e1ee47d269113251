#include "ops/linear.h"

#include <omp.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/matmul.h"
#include "core/threads.h"
#include "ops/gelu.h"
#include "ops/row_bias.h"

namespace gmlp {

namespace {

// Which elements of a layer's output share a bias: those of a column (linear_forward's b[j]), or
// those of a row (token_linear_forward's b[r]).
enum class BiasPer { column, row };

// The epilogue of a layer's product y (rows ld apart, where the slope and add lie), on a block of
// it: the bias, then with act = gelu the activation (its slope, when given, kept alongside:
// linear_forward), then a residual's sum add + y. The same bits as passes of their own after the
// product.
template <class T>
auto layer_output(int64_t ld, const T* b, BiasPer per, Activation act, T* slope, bool slope_bf16, const T* add) {
  GMLP_CHECK(!add || act == Activation::none);
  return [=](const gemm::Block& block) {
    const int64_t c0 = block.c0, w = block.c1 - block.c0;
    for (int64_t r = block.r0; r < block.r1; ++r) {
      T* row = block.row<T>(r);  // from column c0
      if (b && per == BiasPer::row) {
        const T v = b[r];
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) row[j] += v;
      } else if (b) {
        const T* bc = b + c0;
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) row[j] += bc[j];
      }
      if (act == Activation::gelu)
        gelu_forward_serial(row, row, w, slope ? element(slope, r * ld + c0, slope_bf16) : nullptr, slope_bf16);
      if (add) {
        const T* a = add + r * ld + c0;
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) row[j] = a[j] + row[j];
      }
    }
  };
}

// The epilogue of an input gradient's product dx (rows ld apart, as the slope's) whose layer's
// input was GELU(z): dx ⊙ GELU'(z), by the slope the forward kept (gelu_backward_by_slope's bits).
template <class T>
auto gelu_gradient(int64_t ld, const T* slope, bool slope_bf16) {
  return [=](const gemm::Block& block) {
    for (int64_t r = block.r0; r < block.r1; ++r)
      gelu_backward_by_slope_serial(block.row<T>(r), element(slope, r * ld + block.c0, slope_bf16), block.c1 - block.c0,
                                    slope_bf16);
  };
}

}  // namespace

template <class T>
void linear_forward(OutputOf<T> y, OperandOf<T> x, const T* W, const T* b, int64_t M, int64_t in, int64_t out,
                    Activation act, T* slope, bool slope_bf16, const T* add) {
  const auto apply = layer_output(out, b, BiasPer::column, act, slope, slope_bf16, add);
  gemm::Epilogue epilogue(apply);
  // The bias alone on a y stored as bfloat16: the product adds it as it rounds (Epilogue::column_bias).
  if constexpr (std::is_same_v<T, float>)
    if (y.is_bf16() && b && act == Activation::none && !add) epilogue = gemm::Epilogue::column_bias(b);
  const bool fused = b || act != Activation::none || add;
  matmul<T>(false, true, M, out, in, x, in, W, in, T(0), y, out, fused ? &epilogue : nullptr);
}

template <class T>
void token_linear_forward(OutputOf<T> y, OperandOf<T> x, const T* W, const T* b, int64_t in, int64_t out, int64_t C,
                          Activation act, T* slope, bool slope_bf16, const T* add) {
  const auto apply = layer_output(C, b, BiasPer::row, act, slope, slope_bf16, add);
  const gemm::Epilogue epilogue(apply);
  const bool fused = b || act != Activation::none || add;
  matmul<T>(false, false, out, C, in, W, in, x, C, T(0), y, C, fused ? &epilogue : nullptr);
}

template <class T>
void column_sum_add(T* db, const T* dy, int64_t ldy, int64_t M, int64_t C) {
  // Each thread sums its block of rows along the rows into its own partial sums, so the inner loop
  // streams and vectorises (a loop down each column strided by ldy did neither, and was 5x slower
  // on fc1's bias).
  GMLP_CHECK(db != nullptr);
  for_rows_summing_columns(db, M, C, [&](int64_t i, T* acc) {
    const T* r = dy + i * ldy;
#pragma omp simd
    for (int64_t j = 0; j < C; ++j) acc[j] += r[j];
  });
}

template <class T>
void linear_backward(T* dx, T* dW, T* db, OperandOf<T> dy, OperandOf<T> x, const T* W, int64_t M, int64_t in,
                     int64_t out, Write dx_write, Activation act, const T* slope, bool slope_bf16) {
  // fwd: y = x·Wᵀ + b  =>  dx += dy·W;  dW += dyᵀ·x;  db += Σ_rows dy
  GMLP_CHECK(act == Activation::none || (dx && slope && dx_write == Write::overwrite));
  const auto gelu_grad = gelu_gradient(in, slope, slope_bf16);
  const gemm::Epilogue activation(gelu_grad);
  if (dx)
    matmul<T>(false, false, M, in, out, dy, out, W, in, dx_write == Write::overwrite ? T(0) : T(1), dx, in,
              act == Activation::gelu ? &activation : nullptr);
  matmul<T>(true, false, out, in, M, dy, out, x, in, T(1), dW, in);
  if (db) column_sum_add(db, dy.data(), out, M, out);
}

template <class T>
void token_linear_backward(T* dx, T* dW, T* db, const T* dy, OperandOf<T> x, const T* W, int64_t in, int64_t out,
                           int64_t C, Activation act, const T* slope, bool slope_bf16) {
  // fwd: y = W·x + b  =>  db += Σ_c dy;  dW += dy·xᵀ;  dx = Wᵀ·dy (⊙ GELU's slope)
  GMLP_CHECK(act == Activation::none || (dx && slope));
  if (db) row_bias_backward(db, dy, out, C);
  matmul<T>(false, true, out, in, C, dy, C, x, C, T(1), dW, in);
  const auto gelu_grad = gelu_gradient(C, slope, slope_bf16);
  const gemm::Epilogue activation(gelu_grad);
  if (dx)
    matmul<T>(true, false, in, C, out, W, in, dy, C, T(0), dx, C, act == Activation::gelu ? &activation : nullptr);
}

template <class T>
void linear_forward_ref(T* y, const T* x, const T* W, const T* b, int64_t M, int64_t in, int64_t out) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b ? double(b[o]) : 0.0;
      for (int64_t k = 0; k < in; ++k) acc += double(x[i * in + k]) * double(W[o * in + k]);
      y[i * out + o] = T(acc);
    }
}

template <class T>
void linear_backward_ref(T* dx, T* dW, T* db, const T* dy, const T* x, const T* W, int64_t M, int64_t in, int64_t out) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t o = 0; o < out; ++o) {
      const T g = dy[i * out + o];
      if (db) db[o] += g;
      for (int64_t k = 0; k < in; ++k) {
        if (dx) dx[i * in + k] += g * W[o * in + k];
        dW[o * in + k] += g * x[i * in + k];
      }
    }
}

#define GMLP_INSTANTIATE(T)                                                                                         \
  template void linear_forward<T>(Output<T>, Operand<T>, const T*, const T*, int64_t, int64_t, int64_t, Activation, \
                                  T*, bool, const T*);                                                              \
  template void linear_backward<T>(T*, T*, T*, Operand<T>, Operand<T>, const T*, int64_t, int64_t, int64_t, Write,  \
                                   Activation, const T*, bool);                                                     \
  template void token_linear_forward<T>(Output<T>, Operand<T>, const T*, const T*, int64_t, int64_t, int64_t,       \
                                        Activation, T*, bool, const T*);                                            \
  template void token_linear_backward<T>(T*, T*, T*, const T*, Operand<T>, const T*, int64_t, int64_t, int64_t,     \
                                         Activation, const T*, bool);                                               \
  template void linear_forward_ref<T>(T*, const T*, const T*, const T*, int64_t, int64_t, int64_t);                 \
  template void linear_backward_ref<T>(T*, T*, T*, const T*, const T*, const T*, int64_t, int64_t, int64_t);        \
  template void column_sum_add<T>(T*, const T*, int64_t, int64_t, int64_t);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
