// GELU's float loops on AVX-512 (ops/gelu.cpp calls them where the CPU has it). Φ(x) and GELU's
// slope Φ(x) + x·φ(x) come from piecewise quartics in |x| whose coefficients stay in registers,
// one vpermi2ps a coefficient: on an AMD Zen 5 1.8× the speed of the rational erf and exp they
// replace (GELU with its slope, in L1), and within 1e-7 of the exact slope and of GELU relative
// to max(1, |y|) (docs/design.md). Every entry point takes Φ and the slope from the same lanes, so
// the forward, the slope it saves and each backward agree to the bit, at any position in any length.
#pragma once

#include <cstdint>

namespace gmlp::gelu_avx512 {

// y = x·Φ(x) (y may alias x); with slope, also the slope there, stored as bfloat16 (rounded to
// nearest even) at (uint16_t*) slope with slope_bf16.
void forward(float* y, const float* x, int64_t n, float* slope, bool slope_bf16);
// dx += dy · slope(x).
void backward(float* dx, const float* dy, const float* x, int64_t n);
// d = d · slope(x).
void backward_inplace(float* d, const float* x, int64_t n);

}  // namespace gmlp::gelu_avx512
