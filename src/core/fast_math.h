// Branch-free elementary functions that the compiler vectorises (libm's are scalar calls), for
// the float paths of GELU and the softmaxes. double keeps libm: the finite-difference tests run
// in double and want the exact function.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace gmlp {

// exp for x <= 0: 2^k · e^r with k = round(x/ln 2), |r| <= ln2/2, e^r by its degree-6 Taylor
// polynomial (relative error < 2e-7 there); inputs below -87 flush to 0.
inline float exp_nonpositive(float x) {
  x = x < -87.f ? -87.f : x;
  // Round to nearest by adding and subtracting 1.5·2^23 (exact for |k| < 2^22).
  const float k = (x * 1.44269504088896341f + 12582912.f) - 12582912.f;
  const float r = (x - k * 0.693145751953125f) - k * 1.42860682030941723212e-6f;  // Cody-Waite
  float p = 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  const int32_t bits = (int32_t(k) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline double exp_nonpositive(double x) { return std::exp(x); }

}  // namespace gmlp
