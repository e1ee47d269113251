// The ops of a small residual CNN (ResNet basic blocks), NCHW layout throughout:
// 2-D convolution without bias, BatchNorm2d, ReLU and global average pooling.
//
// Convolution is im2col plus one matrix product over the whole batch (through matmul()):
// the column matrix is laid out (Cin·k·k, B·Ho·Wo), row (ci, ky, kx), column (b, oy, ox), so
//   Y' (Cout, B·Ho·Wo) = W (Cout, Cin·k·k) · col,
// and Y' is transposed into y (B, Cout, Ho·Wo). Backward reuses the same layout:
//   dW += dY'·colᵀ,   dcol = Wᵀ·dY',   dx = col2im(dcol)  (overlapping windows add up).
// The transposed Y' / dY' live in an internal per-thread scratch of B·Cout·Ho·Wo values (per T)
// that grows to the largest layer seen and is kept for the life of the thread.
#pragma once

#include <cstdint>

namespace gmlp {

struct ConvShape {
  int64_t B, Cin, H, W;          // input (B, Cin, H, W)
  int64_t Cout, k, stride, pad;  // square k×k kernel, as torch.nn.Conv2d(Cin, Cout, k, stride, pad, bias=False)
  int64_t Ho() const { return (H + 2 * pad - k) / stride + 1; }
  int64_t Wo() const { return (W + 2 * pad - k) / stride + 1; }
  int64_t col_rows() const { return Cin * k * k; }
  // Values of the im2col scratch `col` that conv2d_forward / conv2d_backward take.
  int64_t col_size() const { return B * col_rows() * Ho() * Wo(); }
};

// y: (B, Cout, Ho, Wo) overwritten; x: (B, Cin, H, W); w: (Cout, Cin, k, k) (torch layout).
// col: scratch of s.col_size() values, overwritten (it ends holding the im2col of x).
template <class T>
void conv2d_forward(T* y, const T* x, const T* w, ConvShape s, T* col);

// dw (Cout, Cin, k, k) += ∂L/∂w; dx (B, Cin, H, W) is overwritten with ∂L/∂x, skipped when dx is
// nullptr (a first layer). col: scratch of s.col_size() values; what it holds on entry is ignored
// (the im2col of x is recomputed into it, so one scratch serves every layer), and it is
// overwritten (with ∂L/∂col when dx is wanted).
template <class T>
void conv2d_backward(T* dx, T* dw, const T* dy, const T* x, const T* w, ConvShape s, T* col);

// Direct-convolution loops (double accumulation), the reference the fast versions are held to;
// same contracts, no scratch.
template <class T>
void conv2d_forward_ref(T* y, const T* x, const T* w, ConvShape s);
template <class T>
void conv2d_backward_ref(T* dx, T* dw, const T* dy, const T* x, const T* w, ConvShape s);

// BatchNorm2d as torch.nn.BatchNorm2d(C, eps, momentum) on x (B, C, HW), y (B, C, HW)
// overwritten (may alias x).
// training: batch statistics over (B, HW), the biased variance for normalising; then, unless
//   running_mean / running_var are nullptr (track_running_stats=False),
//   running_mean = (1-m)·running_mean + m·mean, running_var = (1-m)·running_var + m·var_unbiased.
//   Needs B·HW > 1 (throws gmlp::Error otherwise, as torch does).
// eval: normalises with running_mean / running_var (not updated).
// mean, rstd (C) receive the statistics used (batch or running; rstd = 1/sqrt(var + eps)) for
// backward; in eval they may be nullptr.
template <class T>
void batchnorm_forward(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta,
                       T* running_mean, T* running_var, int64_t B, int64_t C, int64_t HW,
                       bool training, T eps, T momentum);

// Training-mode backward (through the batch statistics) from the mean / rstd that forward saved:
// dx (B, C, HW) overwritten (skipped when nullptr; must not alias dy), dgamma, dbeta (C)
// accumulate.
template <class T>
void batchnorm_backward(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, const T* mean,
                        const T* rstd, const T* gamma, int64_t B, int64_t C, int64_t HW);

template <class T>
void batchnorm_forward_ref(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta,
                           T* running_mean, T* running_var, int64_t B, int64_t C, int64_t HW,
                           bool training, T eps, T momentum);
template <class T>
void batchnorm_backward_ref(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, const T* mean,
                            const T* rstd, const T* gamma, int64_t B, int64_t C, int64_t HW);

// ReLU: y = max(x, 0) (may alias x; NaN propagates as in torch).
template <class T>
void relu_forward(T* y, const T* x, int64_t n);
// dy *= [y > 0], in place, from the forward's output y.
template <class T>
void relu_backward_inplace(T* dy, const T* y, int64_t n);

// Global average pool: y (B, C) overwritten with the mean of x (B, C, HW) over HW.
template <class T>
void global_avg_pool_forward(T* y, const T* x, int64_t B, int64_t C, int64_t HW);
// dx (B, C, HW) overwritten with dy[b, c] / HW.
template <class T>
void global_avg_pool_backward(T* dx, const T* dy, int64_t B, int64_t C, int64_t HW);

}  // namespace gmlp
