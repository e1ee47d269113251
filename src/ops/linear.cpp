#include "ops/linear.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/matmul.h"
#include "core/threads.h"
#include "ops/gelu.h"

namespace gmlp {

template <class T>
void linear_forward(T* y, OperandOf<T> x, const T* W, const T* b, int64_t M, int64_t in, int64_t out, Activation act,
                    T* slope, bool slope_bf16, const T* add) {
  GMLP_CHECK(!add || act == Activation::none);
  const auto apply = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    for (int64_t r = r0; r < r1; ++r) {
      T* row = y + r * out;
      if (b) {
#pragma omp simd
        for (int64_t j = c0; j < c1; ++j) row[j] += b[j];
      }
      if (act == Activation::gelu)
        gelu_forward_serial(row + c0, row + c0, c1 - c0, slope ? element(slope, r * out + c0, slope_bf16) : nullptr,
                            slope_bf16);
      if (add) {
        const T* a = add + r * out;
#pragma omp simd
        for (int64_t j = c0; j < c1; ++j) row[j] = a[j] + row[j];
      }
    }
  };
  const gemm::Epilogue epilogue(apply);
  const bool fused = b || act != Activation::none || add;
  matmul<T>(false, true, M, out, in, x, in, W, in, T(0), y, out, fused ? &epilogue : nullptr);
}

template <class T>
void column_sum_add(T* db, const T* dy, int64_t ldy, int64_t M, int64_t C) {
  // Each thread sums its block of rows along the rows into its own partial sums, so the inner loop
  // streams and vectorises (a loop down each column strided by ldy did neither, and was 5x slower
  // on fc1's bias).
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
  const auto gelu_grad = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    for (int64_t r = r0; r < r1; ++r)
      gelu_backward_by_slope_serial(dx + r * in + c0, element(slope, r * in + c0, slope_bf16), c1 - c0, slope_bf16);
  };
  const gemm::Epilogue activation(gelu_grad);
  if (dx)
    matmul<T>(false, false, M, in, out, dy, out, W, in, dx_write == Write::overwrite ? T(0) : T(1), dx, in,
              act == Activation::gelu ? &activation : nullptr);
  matmul<T>(true, false, out, in, M, dy, out, x, in, T(1), dW, in);
  if (db) column_sum_add(db, dy.data(), out, M, out);
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

#define GMLP_INSTANTIATE(T)                                                                                            \
  template void linear_forward<T>(T*, Operand<T>, const T*, const T*, int64_t, int64_t, int64_t, Activation, T*, bool, \
                                  const T*);                                                                           \
  template void linear_backward<T>(T*, T*, T*, Operand<T>, Operand<T>, const T*, int64_t, int64_t, int64_t, Write,     \
                                   Activation, const T*, bool);                                                        \
  template void linear_forward_ref<T>(T*, const T*, const T*, const T*, int64_t, int64_t, int64_t);                    \
  template void linear_backward_ref<T>(T*, T*, T*, const T*, const T*, const T*, int64_t, int64_t, int64_t);           \
  template void column_sum_add<T>(T*, const T*, int64_t, int64_t, int64_t);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
