#include "peak.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "core/cpu_features.h"
#include "core/gemm_kernel.h"

namespace gmlp::bench {
namespace {

// Each kernel runs `iters` rounds of independent multiply-adds on registers (more chains than
// the instruction's latency times the ports, so the ports never wait) and returns something of
// the result, so that nothing is optimised away.
constexpr int kChains = 12;

__attribute__((target("avx2,fma"))) float fma_avx2(int64_t iters) {
  __m256 acc[kChains];
  const __m256 m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-3f);
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(float(i));
  for (int64_t k = 0; k < iters; ++k)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, c);
  float s = 0;
  for (int i = 0; i < kChains; ++i) s += _mm256_cvtss_f32(acc[i]);
  return s;
}

__attribute__((target("avx512f"))) float fma_avx512(int64_t iters) {
  __m512 acc[kChains];
  const __m512 m = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-3f);
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(float(i));
  for (int64_t k = 0; k < iters; ++k)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, c);
  float s = 0;
  for (int i = 0; i < kChains; ++i) s += _mm512_cvtss_f32(acc[i]);
  return s;
}

__attribute__((target("avx512f,avx512bf16"))) float dot_bf16(int64_t iters) {
  __m512 acc[kChains];
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3a83);  // 1, ~1e-3
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(float(i));
  for (int64_t k = 0; k < iters; ++k)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  float s = 0;
  for (int i = 0; i < kChains; ++i) s += _mm512_cvtss_f32(acc[i]);
  return s;
}

// AMX: 4 accumulator tiles of 16 × 16 fp32, each round loading 2 A tiles (16 × 32 bf16) and 2 B
// tiles from L1 and running the 4 products (16·16·32 multiply-adds each): the peak with tile
// loads, which is what a product's inner loop can reach.
__attribute__((target("amx-tile,amx-bf16"))) float tiles_amx(int64_t iters) {
  alignas(64) static thread_local uint16_t in[4][16 * 32];  // bf16 operands, in L1
  alignas(64) static thread_local float out[16 * 16];
  for (auto& t : in) std::fill(t, t + 16 * 32, uint16_t(0x3f80));
  gemm::amx_configure();  // the product's eight tiles of 16 rows × 64 bytes
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t k = 0; k < iters; ++k) {
    _tile_loadd(4, in[0], 64);
    _tile_loadd(5, in[1], 64);
    _tile_loadd(6, in[2], 64);
    _tile_loadd(7, in[3], 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}

// Runs kernel(iters) on `threads` threads at once, iters sized for about `seconds`; the best
// GFLOP/s of 3 runs.
template <float (*kernel)(int64_t)>
double run(int threads, double seconds, double flops_per_iter) {
  static volatile float sink;
  auto timed = [&](int64_t iters) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
    {
      const float s = kernel(iters);
#pragma omp critical
      sink = sink + s;
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  int64_t iters = 100000;
  const double t = timed(iters);  // also the warm-up
  iters = std::max<int64_t>(iters, int64_t(double(iters) * seconds / std::max(t, 1e-6)));
  double best = 0;
  for (int r = 0; r < 3; ++r) best = std::max(best, double(threads) * double(iters) * flops_per_iter / timed(iters));
  return best / 1e9;
}

}  // namespace

std::vector<Peak> available_peaks() {
  const CpuFeatures& f = cpu_features();
  std::vector<Peak> peaks;
  if (f.avx512f)
    peaks.push_back({"fp32 FMA (AVX-512)", 32, [](int t, double s) { return run<fma_avx512>(t, s, kChains * 32.0); }});
  else if (f.avx2)
    peaks.push_back({"fp32 FMA (AVX2)", 16, [](int t, double s) { return run<fma_avx2>(t, s, kChains * 16.0); }});
  if (f.avx512_bf16)
    peaks.push_back(
        {"bf16 dot (AVX512-BF16)", 64, [](int t, double s) { return run<dot_bf16>(t, s, kChains * 64.0); }});
  if (gemm::amx_permitted())
    peaks.push_back({"bf16 tiles (AMX, tile loads from L1)", 16 * 16 * 32 * 2,
                     [](int t, double s) { return run<tiles_amx>(t, s, 4 * 16 * 16 * 32 * 2.0); }});
  return peaks;
}

}  // namespace gmlp::bench
