// bfloat16 ⇄ float: the upper 16 bits of an IEEE float. Rounding is to nearest even, NaN stays
// a (quiet) NaN. Shared by the bf16 matrix products and the safetensors reader.
#pragma once

#include <bit>
#include <cstdint>

namespace gmlp {

// Branch-free, so that a loop of it vectorises.
inline uint16_t float_to_bf16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return uint16_t((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40 : rounded);  // NaN stays NaN
}

// As AVX512-BF16's vcvtne2ps2bf16 rounds, which the products' packing and round_to_bf16 use: as
// float_to_bf16, except that a denormal becomes a zero of its sign (the instruction treats input
// denormals as zero).
inline uint16_t float_to_bf16_daz(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  return (u & 0x7f800000u) == 0 ? uint16_t((u >> 16) & 0x8000u) : float_to_bf16(x);
}

inline float bf16_to_float(uint16_t x) { return std::bit_cast<float>(uint32_t{x} << 16); }

}  // namespace gmlp
