// bf16gemm's two formats in portable code (this file has no target flags): their tiles
// (AVX512-BF16's 8 × 32 and AMX's 32 × 32), and on a CPU without AVX512-BF16 the packing and
// rounding that gemm_avx512bf16.cpp does with vector instructions, word for word. With them the
// bf16 paths of the products and of every op that stores bf16 run, and are tested, on any CPU
// (gemm::set_bf16_emulated), at a fraction of fp32's speed. Packing rounds as vcvtne2ps2bf16 does
// (float_to_bf16_daz), so a CPU with AVX512-BF16 and one without pack the same words.
#include <algorithm>
#include <cstring>

#include "core/bf16.h"
#include "core/gemm_kernel.h"

namespace gmlp::gemm {

namespace {
// A pair word's two bfloat16, the even depth's in the low half.
inline float lo(uint32_t w) { return bf16_to_float(uint16_t(w & 0xffff)); }
inline float hi(uint32_t w) { return bf16_to_float(uint16_t(w >> 16)); }
}  // namespace

void tile_amx_emulated(int64_t pairs, const uint32_t* a, int64_t lda, const uint32_t* b, float* c, int64_t ldc,
                       bool accumulate) {
  // Row by row with the row's 32 sums side by side, so that the loop over them vectorises; each
  // sum still takes its pairs in order, each pair's two products in turn.
  for (int64_t i = 0; i < kMRAmx; ++i) {
    float s[kNRBf16];
    for (int64_t j = 0; j < kNRBf16; ++j) s[j] = accumulate ? c[i * ldc + j] : 0.f;
    for (int64_t p = 0; p < pairs; ++p) {
      const uint32_t x = a[i * lda + p];
      const float x0 = lo(x), x1 = hi(x);
      const uint32_t* y = b + p * kNRBf16;
      for (int64_t j = 0; j < kNRBf16; ++j) {
        s[j] += x0 * lo(y[j]);
        s[j] += x1 * hi(y[j]);
      }
    }
    std::copy(s, s + kNRBf16, c + i * ldc);
  }
}

namespace {

// The first R rows of AVX512-BF16's tile: row i's pair p at a[i·row + p·step] (packed: row 1,
// step MR; read in place: row lda, step 1). Each sum starts from zero and takes its pairs in
// order, each pair's products in vdpbf16ps's order (the odd depth's, then the even's); C, when
// accumulating, is added to the finished sum, as the kernel does.
void tile_bf16_rows(int rows, int64_t pairs, const uint32_t* a, int64_t row, int64_t step, const uint32_t* b, float* c,
                    int64_t ldc, bool accumulate) {
  for (int i = 0; i < rows; ++i) {
    float s[kNRBf16] = {};
    for (int64_t p = 0; p < pairs; ++p) {
      const uint32_t x = a[i * row + p * step];
      const float x0 = lo(x), x1 = hi(x);
      const uint32_t* y = b + p * kNRBf16;
      for (int64_t j = 0; j < kNRBf16; ++j) {
        s[j] += x1 * hi(y[j]);
        s[j] += x0 * lo(y[j]);
      }
    }
    float* out = c + i * ldc;
    for (int64_t j = 0; j < kNRBf16; ++j) out[j] = accumulate ? s[j] + out[j] : s[j];
  }
}

}  // namespace

void tile_bf16_emulated(int64_t pairs, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, bool accumulate) {
  tile_bf16_rows(kMRBf16, pairs, a, 1, kMRBf16, b, c, ldc, accumulate);
}
void tile_direct_bf16_emulated(int64_t pairs, const uint32_t* a, int64_t lda, const uint32_t* b, float* c, int64_t ldc,
                               bool accumulate) {
  tile_bf16_rows(kMRBf16, pairs, a, lda, 1, b, c, ldc, accumulate);
}
void tile_rows_bf16_emulated(int rows, int64_t pairs, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc) {
  tile_bf16_rows(rows, pairs, a, 1, kMRBf16, b, c, ldc, false);
}

namespace {

inline uint16_t bf16_of(float x) { return float_to_bf16_daz(x); }
inline uint16_t bf16_of(uint16_t x) { return x; }

// The pair word of op(X)'s elements at depth 2p and 2p + 1 of one row or column: element k at
// x[k·step], zero from depth kc on.
template <class Src>
inline uint32_t pair_word(const Src* x, int64_t step, int64_t p, int64_t kc) {
  const int64_t k = 2 * p;
  const uint32_t even = k < kc ? bf16_of(x[k * step]) : 0, odd = k + 1 < kc ? bf16_of(x[(k + 1) * step]) : 0;
  return even | odd << 16;
}

inline float value(float x) { return x; }
inline float value(uint16_t x) { return bf16_to_float(x); }

}  // namespace

namespace portable {

template <class Src>
void pack_a_bf16(uint32_t* dst, const Src* src, int64_t rs, int64_t cs, int64_t rows, int64_t kc) {
  const int64_t pairs = (kc + 1) / 2;
  for (int64_t t = 0; t < rows; t += kMRBf16, dst += kMRBf16 * pairs)
    for (int64_t p = 0; p < pairs; ++p)
      for (int64_t i = 0; i < kMRBf16; ++i)
        dst[p * kMRBf16 + i] = t + i < rows ? pair_word(src + (t + i) * rs, cs, p, kc) : 0;
}

template <class Src>
void pack_a_amx(uint32_t* dst, const Src* src, int64_t rs, int64_t cs, int64_t rows, int64_t kc) {
  const int64_t pairs = (kc + 1) / 2, words = (pairs + kAmxPairs - 1) / kAmxPairs * kAmxPairs;
  for (int64_t t = 0; t < rows; t += kMRAmx, dst += kMRAmx * words)
    for (int64_t i = 0; i < kMRAmx; ++i) {
      uint32_t* d = dst + i * words;
      for (int64_t p = 0; p < words; ++p) d[p] = t + i < rows ? pair_word(src + (t + i) * rs, cs, p, kc) : 0;
    }
}

template <class Src>
void pack_b_bf16(uint32_t* dst, const Src* src, int64_t rs, int64_t cs, int64_t kc, int64_t cols) {
  for (int64_t p = 0; p < (kc + 1) / 2; ++p)
    for (int64_t j = 0; j < kNRBf16; ++j) dst[p * kNRBf16 + j] = j < cols ? pair_word(src + j * cs, rs, p, kc) : 0;
}

template <class Scale>
void round_to_bf16(uint16_t* dst, const float* src, int64_t n, const Scale* scale, float* sum) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = scale ? src[i] * value(scale[i]) : src[i];
    if (sum) sum[i] += x;
    dst[i] = float_to_bf16_daz(x);
  }
}

void round_to_bf16_adding(uint16_t* dst, const float* src, const float* bias, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = float_to_bf16_daz(src[i] + bias[i]);
}

#define GMLP_INSTANTIATE(S)                                                              \
  template void pack_a_bf16<S>(uint32_t*, const S*, int64_t, int64_t, int64_t, int64_t); \
  template void pack_a_amx<S>(uint32_t*, const S*, int64_t, int64_t, int64_t, int64_t);  \
  template void pack_b_bf16<S>(uint32_t*, const S*, int64_t, int64_t, int64_t, int64_t); \
  template void round_to_bf16<S>(uint16_t*, const float*, int64_t, const S*, float*);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(uint16_t)
#undef GMLP_INSTANTIATE

}  // namespace portable

}  // namespace gmlp::gemm
