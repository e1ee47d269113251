// The 8 × 8 transpose of 32-bit lanes in eight AVX registers, shared by the kernels' packing
// (gemm_avx2.cpp's fp32 panels, gemm_avx512bf16.cpp's bf16 pair words). Include it only from a
// file compiled for AVX2 or above. Internal linkage (the unnamed namespace): each file keeps the
// copy compiled for its own instruction set, where one shared inline definition could hand an
// AVX2-only CPU the AVX-512 file's.
#pragma once

#include <immintrin.h>

namespace gmlp::gemm {
namespace {

// r[q][p] ← r[p][q]: the 8 × 8 block held by eight registers, transposed.
inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int q = 0; q < 8; q += 2)
    t[q] = _mm256_unpacklo_ps(r[q], r[q + 1]), t[q + 1] = _mm256_unpackhi_ps(r[q], r[q + 1]);
  for (int q = 0; q < 8; q += 4) {
    u[q] = _mm256_shuffle_ps(t[q], t[q + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[q + 1] = _mm256_shuffle_ps(t[q], t[q + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[q + 2] = _mm256_shuffle_ps(t[q + 1], t[q + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[q + 3] = _mm256_shuffle_ps(t[q + 1], t[q + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int q = 0; q < 4; ++q) {
    r[q] = _mm256_permute2f128_ps(u[q], u[q + 4], 0x20);
    r[q + 4] = _mm256_permute2f128_ps(u[q], u[q + 4], 0x31);
  }
}

// The same on 32-bit integer lanes (bf16 pair words): the shuffles move bits only.
inline void transpose8(__m256i r[8]) {
  __m256 f[8];
  for (int q = 0; q < 8; ++q) f[q] = _mm256_castsi256_ps(r[q]);
  transpose8(f);
  for (int q = 0; q < 8; ++q) r[q] = _mm256_castps_si256(f[q]);
}

}  // namespace
}  // namespace gmlp::gemm
