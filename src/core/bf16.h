// bfloat16 ⇄ float: the upper 16 bits of an IEEE float. Rounding is to nearest even, NaN stays
// a (quiet) NaN. Shared by the bf16 matrix products and the safetensors reader.
#pragma once

#include <bit>
#include <cstdint>

namespace gmlp {

inline uint16_t float_to_bf16(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

inline float bf16_to_float(uint16_t x) { return std::bit_cast<float>(uint32_t{x} << 16); }

}  // namespace gmlp
