// gemm_kernel.h's tile and packing for AVX2 + FMA (this file is compiled with -mavx2 -mfma).
#include <immintrin.h>

#include "core/gemm_kernel.h"
#include "core/transpose8.h"

namespace gmlp::gemm {

namespace {
struct Avx2 {
  using type = __m256;
  static constexpr int width = 8;
  static type zero() { return _mm256_setzero_ps(); }
  static type load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, type v) { _mm256_storeu_ps(p, v); }
  static type broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static type fma(type a, type b, type c) { return _mm256_fmadd_ps(a, b, c); }
  static type add(type a, type b) { return _mm256_add_ps(a, b); }
};
static_assert(2 * Avx2::width == kNRAvx2);

}  // namespace

void pack_b_transposed_avx2(float* dst, const float* src, int64_t ld, int64_t kc, int64_t nr, int64_t cols) {
  int64_t k = 0;
  for (; k + 8 <= kc; k += 8)
    for (int64_t j = 0; j < nr; j += 8) {
      __m256 r[8];
      for (int q = 0; q < 8; ++q) r[q] = j + q < cols ? _mm256_loadu_ps(src + (j + q) * ld + k) : _mm256_setzero_ps();
      transpose8(r);
      for (int q = 0; q < 8; ++q) _mm256_storeu_ps(dst + (k + q) * nr + j, r[q]);
    }
  for (; k < kc; ++k)
    for (int64_t j = 0; j < nr; ++j) dst[k * nr + j] = j < cols ? src[j * ld + k] : 0.f;
}

void pack_a_rows_avx2(float* dst, const float* src, int64_t ld, int64_t kc, int rows, int mr) {
  int64_t k = 0;
  for (; k + 8 <= kc; k += 8)
    for (int g = 0; g < mr; g += 8) {  // 8 rows at a time, of which the panel's first (6, 8 or 4)
      __m256 r[8];
      for (int i = 0; i < 8; ++i) r[i] = g + i < rows ? _mm256_loadu_ps(src + (g + i) * ld + k) : _mm256_setzero_ps();
      transpose8(r);
      const int lanes = mr - g < 8 ? mr - g : 8;
      for (int q = 0; q < 8; ++q) {
        float* d = dst + (k + q) * mr + g;
        if (lanes == 8) {
          _mm256_storeu_ps(d, r[q]);
          continue;
        }
        _mm_storeu_ps(d, _mm256_castps256_ps128(r[q]));
        if (lanes == 6) _mm_storel_pi(reinterpret_cast<__m64*>(d + 4), _mm256_extractf128_ps(r[q], 1));
      }
    }
  for (; k < kc; ++k)
    for (int i = 0; i < mr; ++i) dst[k * mr + i] = i < rows ? src[i * ld + k] : 0.f;
}

void tile_rows_avx2(int rows, int64_t kc, const float* a, const float* b, float* c, int64_t ldc) {
  tile_rows<Avx2, kMRAvx2>(rows, kc, a, b, c, ldc);
}

void tile_avx2(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate) {
  tile<Avx2, kMRAvx2>(kc, a, b, c, ldc, accumulate);
}

void tile_direct_avx2(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc, bool accumulate) {
  tile<Avx2, kMRAvx2, true>(kc, a, b, c, ldc, accumulate, lda);
}

}  // namespace gmlp::gemm
