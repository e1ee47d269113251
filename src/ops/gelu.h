// GELU, exact erf form (torch.nn.GELU(approximate='none')): y = x · Φ(x) = x/2 · (1 + erf(x/√2)).
#pragma once

#include <cstdint>

namespace gmlp {

// y (n) overwritten; may alias x.
template <class T>
void gelu_forward(T* y, const T* x, int64_t n);
// The same on the calling thread alone, with the same bits (a product's fused epilogue). With
// slope, also slope = Φ(x) + x·φ(x), GELU's derivative, from the same erf: what backward
// multiplies by (gelu_backward_inplace's factor, the same bits). y may alias x. slope_bf16
// (float only): the slope is stored as bfloat16, rounded to nearest even, at the address
// element(slope, i, true) (core/operand.h) names; see gelu_slope_bf16().
template <class T>
void gelu_forward_serial(T* y, const T* x, int64_t n, T* slope = nullptr, bool slope_bf16 = false);
// Whether a layer stores GELU's slope as bfloat16: for float in bf16 precision. The slope only
// scales a gradient that the products then read rounded to bfloat16, and as bf16 it is half the
// bytes to write in the forward and to read back in the backward (the same relative error, 2^-9,
// as that rounding).
template <class T>
bool gelu_slope_bf16();
// dx += dy · (Φ(x) + x·φ(x)).
template <class T>
void gelu_backward(T* dx, const T* dy, const T* x, int64_t n);

// d = d · (Φ(x) + x·φ(x)) in place: turns ∂L/∂y into ∂L/∂x without a second buffer.
template <class T>
void gelu_backward_inplace(T* d, const T* x, int64_t n);
// d = d · slope, slope from gelu_forward_serial (stored as bfloat16 with slope_bf16):
// gelu_backward_inplace's bits without its erf and exp, for a float slope. On rows, d (M, C):
// with dbias, their sum is added to dbias (the bias gradient of the layer GELU follows, in the
// same pass); with d16 (float only), the result is stored there as bfloat16 instead of in d
// (core/operand.h: only the layer's products read it). The serial form is for a product's fused
// epilogue.
template <class T>
void gelu_backward_by_slope(T* d, const T* slope, int64_t M, int64_t C, T* dbias = nullptr, uint16_t* d16 = nullptr,
                            bool slope_bf16 = false);
template <class T>
void gelu_backward_by_slope_serial(T* d, const T* slope, int64_t n, bool slope_bf16 = false);
// One row of gelu_backward_by_slope, on the calling thread: d (C) times the slope, added to acc
// (C) when given, and stored in d, or with d16 (float only) as bfloat16 there. For an op that
// makes the gradient row by row and applies GELU's backward to each row once it is final
// (sgu_backward), with the bits of the pass above.
template <class T>
void gelu_backward_by_slope_row(T* d, const T* slope, int64_t C, T* acc, uint16_t* d16, bool slope_bf16);

template <class T>
void gelu_forward_ref(T* y, const T* x, int64_t n);
template <class T>
void gelu_backward_ref(T* dx, const T* dy, const T* x, int64_t n);

}  // namespace gmlp
