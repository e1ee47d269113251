// gemm_kernel.h's tile for AVX-512 (this file is compiled with -mavx512f).
#include <immintrin.h>

#include "core/gemm_kernel.h"

namespace gmlp::gemm {

namespace {
struct Avx512 {
  using type = __m512;
  static constexpr int width = 16;
  static type zero() { return _mm512_setzero_ps(); }
  static type load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, type v) { _mm512_storeu_ps(p, v); }
  static type broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static type fma(type a, type b, type c) { return _mm512_fmadd_ps(a, b, c); }
  static type add(type a, type b) { return _mm512_add_ps(a, b); }
};
static_assert(2 * Avx512::width == kNRAvx512);
}  // namespace

void tile_rows_avx512(int rows, int64_t kc, const float* a, const float* b, float* c, int64_t ldc) {
  tile_rows<Avx512, kMRAvx512>(rows, kc, a, b, c, ldc);
}

void tile_avx512(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate) {
  tile<Avx512, kMRAvx512>(kc, a, b, c, ldc, accumulate);
}

void tile_direct_avx512(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc,
                        bool accumulate) {
  tile<Avx512, kMRAvx512, true>(kc, a, b, c, ldc, accumulate, lda);
}

}  // namespace gmlp::gemm
