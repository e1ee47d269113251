// gemm_kernel.h's tile for AVX2 + FMA (this file is compiled with -mavx2 -mfma).
#include <immintrin.h>

#include "core/gemm_kernel.h"

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

void tile_avx2(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate) {
  tile<Avx2>(kc, a, b, c, ldc, accumulate);
}

}  // namespace gmlp::gemm
