// 2-D convolution without bias, as torch.nn.Conv2d(Cin, Cout, k, stride, pad, bias=False), NCHW
// layout (the residual CNN's convolutions).
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
  int64_t B, Cin, Hi, Wi;        // input (B, Cin, Hi, Wi)
  int64_t Cout, k, stride, pad;  // square k×k kernel, as torch.nn.Conv2d(Cin, Cout, k, stride, pad, bias=False)
  int64_t Ho() const { return (Hi + 2 * pad - k) / stride + 1; }
  int64_t Wo() const { return (Wi + 2 * pad - k) / stride + 1; }
  int64_t col_rows() const { return Cin * k * k; }
  // Values of the im2col scratch `col` that conv2d_forward / conv2d_backward take.
  int64_t col_size() const { return B * col_rows() * Ho() * Wo(); }
};

// y: (B, Cout, Ho, Wo) overwritten; x: (B, Cin, Hi, Wi); w: (Cout, Cin, k, k) (torch layout).
// col: scratch of s.col_size() values, overwritten (it ends holding the im2col of x).
template <class T>
void conv2d_forward(T* y, const T* x, const T* w, ConvShape s, T* col);

// dw (Cout, Cin, k, k) += ∂L/∂w; dx (B, Cin, Hi, Wi) is overwritten with ∂L/∂x, skipped when dx is
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

}  // namespace gmlp
