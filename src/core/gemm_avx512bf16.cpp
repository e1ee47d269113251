// gemm_kernel.h's bf16 tile and packing for AVX512-BF16 (this file is compiled with -mavx512f
// -mavx512bw -mavx512vl -mavx512bf16). The operands are rounded to bfloat16 while they are packed,
// so no product reads a rounded copy of a whole operand: the packing that blocking needs anyway
// does the rounding.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/gemm.h"
#include "core/gemm_kernel.h"
#include "core/transpose8.h"

namespace gmlp::gemm {

namespace {

// The first n lanes (none when n ≤ 0, all when n ≥ the width): masked loads read nothing beyond.
inline __mmask8 first8(int64_t n) { return n >= 8 ? 0xff : n <= 0 ? 0 : __mmask8((1u << n) - 1); }
inline __mmask16 first16(int64_t n) { return n >= 16 ? 0xffff : n <= 0 ? 0 : __mmask16((1u << n) - 1); }

// 16 elements at x (depth k) and 16 at y (depth k + 1), of which the first lanes of m, as bf16:
// x's in the low 256 bits, y's in the high; y null reads as zeros (an odd depth's last pair).
// Floats are rounded here (cvtne2ps2bf16), bfloat16 is taken as it is.
inline __m512i halves(const float* x, const float* y, __mmask16 m) {
  const __m512 yv = y ? _mm512_maskz_loadu_ps(m, y) : _mm512_setzero_ps();
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(yv, _mm512_maskz_loadu_ps(m, x)));
}
inline __m512i halves(const uint16_t* x, const uint16_t* y, __mmask16 m) {
  const __m256i yv = y ? _mm256_maskz_loadu_epi16(m, y) : _mm256_setzero_si256();
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_maskz_loadu_epi16(m, x)), yv, 1);
}

// x's and y's 16 elements, column for column, as 16 pair words.
template <class Src>
inline __m512i interleave16(const Src* x, const Src* y, __mmask16 m) {
  const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21,
                                         5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(order, halves(x, y, m));
}

// The n ≤ 16 elements along k at p (zero beyond) as 8 pair words.
inline __m256i pairs16(const float* p, int64_t n) {
  const __m256 lo = _mm256_maskz_loadu_ps(first8(n), p), hi = _mm256_maskz_loadu_ps(first8(n - 8), p + 8);
  return reinterpret_cast<__m256i>(_mm256_cvtne2ps_pbh(hi, lo));
}
inline __m256i pairs16(const uint16_t* p, int64_t n) { return _mm256_maskz_loadu_epi16(first16(n), p); }

// The first R rows of the 8 × 32 tile. A packed (Direct = false): row i's pair p at a[p·MR + i].
// A in place (Direct): row i's pair p at a[i·lda + p], lda in pair words.
template <int R, bool Direct = false>
void tile_bf16_rows(int64_t pairs, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, bool accumulate,
                    int64_t lda = 0) {
  __m512 s[R][2];
  const uint32_t* row[R];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) row[i] = Direct ? a + i * lda : a + i;
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) __builtin_prefetch(c + i * ldc, 1, 3), __builtin_prefetch(c + i * ldc + 31, 1, 3);
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) s[i][0] = _mm512_setzero_ps(), s[i][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512bh b0 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + p * kNRBf16));
    const __m512bh b1 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + p * kNRBf16 + 16));
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const uint32_t word = Direct ? row[i][p] : row[i][p * kMRBf16];
      const __m512bh ai = reinterpret_cast<__m512bh>(_mm512_set1_epi32(int(word)));
      s[i][0] = _mm512_dpbf16_ps(s[i][0], ai, b0);
      s[i][1] = _mm512_dpbf16_ps(s[i][1], ai, b1);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
    float* out = c + i * ldc;
    if (accumulate)
      s[i][0] = _mm512_add_ps(s[i][0], _mm512_loadu_ps(out)),
      s[i][1] = _mm512_add_ps(s[i][1], _mm512_loadu_ps(out + 16));
    _mm512_storeu_ps(out, s[i][0]);
    _mm512_storeu_ps(out + 16, s[i][1]);
  }
}

}  // namespace

void tile_bf16(int64_t pairs, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, bool accumulate) {
  tile_bf16_rows<kMRBf16>(pairs, a, b, c, ldc, accumulate);
}

void tile_direct_bf16(int64_t pairs, const uint32_t* a, int64_t lda, const uint32_t* b, float* c, int64_t ldc,
                      bool accumulate) {
  tile_bf16_rows<kMRBf16, true>(pairs, a, b, c, ldc, accumulate, lda);
}

void tile_rows_bf16(int rows, int64_t pairs, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc) {
  static_assert(kMRBf16 == 8);
  switch (rows) {
    case 1: return tile_bf16_rows<1>(pairs, a, b, c, ldc, false);
    case 2: return tile_bf16_rows<2>(pairs, a, b, c, ldc, false);
    case 3: return tile_bf16_rows<3>(pairs, a, b, c, ldc, false);
    case 4: return tile_bf16_rows<4>(pairs, a, b, c, ldc, false);
    case 5: return tile_bf16_rows<5>(pairs, a, b, c, ldc, false);
    case 6: return tile_bf16_rows<6>(pairs, a, b, c, ldc, false);
    default: return tile_bf16_rows<7>(pairs, a, b, c, ldc, false);
  }
}

// Both packs read op(A) and op(B) along whichever side is contiguous (every view the product makes
// has one), with masked loads at the edges, so that zero fills what lies beyond the rows, the
// columns and the depth.
namespace {
template <class Src>
void pack_a(uint32_t* dst, const Src* src, int64_t rs, int64_t cs, int64_t rows, int64_t kc) {
  static_assert(kMRBf16 == 8);  // a panel's rows are one 8 × 8 transpose
  const int64_t pairs = (kc + 1) / 2, panel = kMRBf16 * pairs;
  int64_t t = 0;
  if (cs == 1) {  // rows contiguous along k: 8 pairs of each row of a panel, transposed in registers
    for (; t < rows; t += kMRBf16, dst += panel, src += kMRBf16 * rs) {
      const int64_t n = std::min<int64_t>(kMRBf16, rows - t);
      for (int64_t p = 0; p < pairs; p += 8) {
        __m256i r[8];
        for (int i = 0; i < 8; ++i) r[i] = i < n ? pairs16(src + i * rs + 2 * p, kc - 2 * p) : _mm256_setzero_si256();
        transpose8(r);
        for (int q = 0; q < 8 && p + q < pairs; ++q)
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (p + q) * kMRBf16), r[q]);
      }
    }
    return;
  }
  // Columns contiguous (op(A) = Aᵀ, rs = 1): two panels at a time, 16 elements at each of two k.
  // The pairs outermost: each two k's elements of the block are read once, left to right, and
  // dealt out to the panels. Panel by panel, each went down all kc rows again for its 16 elements,
  // missing L1 on every row: that pass was a fifth of a weight gradient's product.
  static_assert(2 * kMRBf16 == 16);
  const int64_t full = rows / 16 * 16;
  for (int64_t p = 0; p < pairs; ++p) {
    const Src* x = src + 2 * p * cs;
    const Src* y = 2 * p + 1 == kc ? nullptr : x + cs;  // an odd depth pairs with zero
    for (int64_t i = 0; i < full; i += 16) {
      const __m512i w = interleave16(x + i, y ? y + i : nullptr, 0xffff);
      uint32_t* d = dst + i / kMRBf16 * panel + p * kMRBf16;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), _mm512_castsi512_si256(w));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + panel), _mm512_extracti64x4_epi64(w, 1));
    }
  }
  t = full, dst += full / kMRBf16 * panel, src += full;
  for (; t < rows; t += kMRBf16, dst += panel, src += kMRBf16) {
    const __mmask16 n = first16(std::min<int64_t>(kMRBf16, rows - t));
    for (int64_t p = 0; p < pairs; ++p) {
      const Src* x = src + 2 * p * cs;
      _mm512_mask_storeu_epi32(dst + p * kMRBf16, first16(kMRBf16),
                               interleave16(x, 2 * p + 1 == kc ? nullptr : x + cs, n));
    }
  }
}

template <class Src>
void pack_b(uint32_t* dst, const Src* src, int64_t rs, int64_t cs, int64_t kc, int64_t cols) {
  const int64_t pairs = (kc + 1) / 2;
  if (cs == 1) {  // rows of op(B) contiguous: the panel's columns at two k at a time
    const __mmask16 m0 = first16(cols), m1 = first16(cols - 16);
    for (int64_t p = 0; p < pairs; ++p) {
      const Src* x = src + 2 * p * rs;
      const Src* y = 2 * p + 1 == kc ? nullptr : x + rs;
      _mm512_storeu_si512(dst + p * kNRBf16, interleave16(x, y, m0));
      _mm512_storeu_si512(dst + p * kNRBf16 + 16, interleave16(x + 16, y ? y + 16 : nullptr, m1));
    }
    return;
  }
  // Columns contiguous along k (op(B) = Bᵀ, rs = 1): 8 pairs of 8 columns, transposed in registers.
  for (int64_t p = 0; p < pairs; p += 8)
    for (int j = 0; j < kNRBf16; j += 8) {
      __m256i r[8];
      for (int q = 0; q < 8; ++q)
        r[q] = j + q < cols ? pairs16(src + (j + q) * cs + 2 * p, kc - 2 * p) : _mm256_setzero_si256();
      transpose8(r);
      for (int q = 0; q < 8 && p + q < pairs; ++q)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (p + q) * kNRBf16 + j), r[q]);
    }
}

// Columns [0, cols) of op(B) as panels `panel` words apart. Where op(B)'s rows are contiguous,
// each two k's rows are read once, left to right, and dealt out to the panels: panel by panel, a
// weight gradient's B (its output's gradient, thousands of rows 1–4 KB long) was read 64 bytes
// a row, and its packing took about half of the product's time.
template <class Src>
void pack_b_panels(uint32_t* dst, int64_t panel, const Src* src, int64_t rs, int64_t cs, int64_t kc, int64_t cols) {
  if (cs != 1) {
    for (int64_t j = 0; j < cols; j += kNRBf16)
      pack_b(dst + j / kNRBf16 * panel, src + j * cs, rs, cs, kc, std::min<int64_t>(kNRBf16, cols - j));
    return;
  }
  const int64_t pairs = (kc + 1) / 2;
  for (int64_t p = 0; p < pairs; ++p) {
    const Src* x = src + 2 * p * rs;
    const Src* y = 2 * p + 1 == kc ? nullptr : x + rs;
    uint32_t* d = dst + p * kNRBf16;
    for (int64_t j = 0; j < cols; j += kNRBf16, d += panel) {
      const __mmask16 m0 = first16(cols - j), m1 = first16(cols - j - 16);
      _mm512_storeu_si512(d, interleave16(x + j, y ? y + j : nullptr, m0));
      _mm512_storeu_si512(d + 16, interleave16(x + j + 16, y ? y + j + 16 : nullptr, m1));
    }
  }
}
}  // namespace

// AMX's A panels: 32 rows of pair words each, row by row (gemm_kernel.h).
namespace {

// w[q] becomes the column q of the 16 × 16 words w held as rows.
inline void transpose16(__m512i w[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2)
    t[i] = _mm512_unpacklo_epi32(w[i], w[i + 1]), t[i + 1] = _mm512_unpackhi_epi32(w[i], w[i + 1]);
  for (int i = 0; i < 16; i += 4) {
    w[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]), w[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    w[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]), w[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int h = 0; h < 16; h += 8)
    for (int i = 0; i < 4; ++i) {
      t[h + i] = _mm512_shuffle_i32x4(w[h + i], w[h + i + 4], 0x88);
      t[h + i + 4] = _mm512_shuffle_i32x4(w[h + i], w[h + i + 4], 0xdd);
    }
  for (int i = 0; i < 8; ++i) {
    w[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
    w[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
  }
}

template <class Src>
void pack_a_tiles(uint32_t* dst, const Src* src, int64_t rs, int64_t cs, int64_t rows, int64_t kc) {
  const int64_t pairs = (kc + 1) / 2, words = (pairs + kAmxPairs - 1) / kAmxPairs * kAmxPairs;
  for (int64_t t = 0; t < rows; t += kMRAmx, dst += kMRAmx * words) {
    if (cs == 1) {  // rows contiguous along k: each row's pairs, 8 at a time, zero beyond kc
      for (int64_t i = 0; i < kMRAmx; ++i) {
        uint32_t* d = dst + i * words;
        if (t + i >= rows) {
          std::memset(d, 0, size_t(words) * sizeof(uint32_t));
          continue;
        }
        const Src* row = src + (t + i) * rs;
        for (int64_t p = 0; p < words; p += 8)
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + p),
                              p < pairs ? pairs16(row + 2 * p, kc - 2 * p) : _mm256_setzero_si256());
      }
      continue;
    }
    // Columns contiguous (op(A) = Aᵀ, rs = 1): 16 rows at each of 16 pairs, interleaved as the
    // AVX512-BF16 panels are, then turned so that each row's 16 pairs are one store.
    for (int64_t r = 0; r < kMRAmx; r += 16) {
      const __mmask16 m = first16(rows - t - r);
      const Src* x0 = src + t + r;
      for (int64_t p = 0; p < words; p += 16) {
        __m512i w[16];
        for (int q = 0; q < 16; ++q) {
          const int64_t k = 2 * (p + q);
          w[q] = m && k < kc ? interleave16(x0 + k * cs, k + 1 < kc ? x0 + (k + 1) * cs : nullptr, m)
                             : _mm512_setzero_si512();
        }
        transpose16(w);
        for (int i = 0; i < 16; ++i) _mm512_storeu_si512(dst + (r + i) * words + p, w[i]);
      }
    }
  }
}

}  // namespace

void transpose_avx512(float* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t rows, int64_t cols) {
  for (int64_t i0 = 0; i0 < rows; i0 += 16)
    for (int64_t j0 = 0; j0 < cols; j0 += 16) {
      const int64_t n = std::min<int64_t>(16, rows - i0), m = std::min<int64_t>(16, cols - j0);
      __m512i w[16];
      for (int64_t i = 0; i < 16; ++i)
        w[i] = i < n ? _mm512_maskz_loadu_epi32(first16(m), src + (i0 + i) * ld_src + j0) : _mm512_setzero_si512();
      transpose16(w);
      for (int64_t j = 0; j < m; ++j) _mm512_mask_storeu_epi32(dst + (j0 + j) * ld_dst + i0, first16(n), w[j]);
    }
}

void pack_a_amx(uint32_t* dst, const float* src, int64_t rs, int64_t cs, int64_t rows, int64_t kc) {
  pack_a_tiles(dst, src, rs, cs, rows, kc);
}
void pack_a_amx(uint32_t* dst, const uint16_t* src, int64_t rs, int64_t cs, int64_t rows, int64_t kc) {
  pack_a_tiles(dst, src, rs, cs, rows, kc);
}

void pack_a_bf16(uint32_t* dst, const float* src, int64_t rs, int64_t cs, int64_t rows, int64_t kc) {
  pack_a(dst, src, rs, cs, rows, kc);
}
void pack_a_bf16(uint32_t* dst, const uint16_t* src, int64_t rs, int64_t cs, int64_t rows, int64_t kc) {
  pack_a(dst, src, rs, cs, rows, kc);
}
void pack_b_bf16(uint32_t* dst, const float* src, int64_t rs, int64_t cs, int64_t kc, int64_t cols) {
  pack_b(dst, src, rs, cs, kc, cols);
}
void pack_b_bf16(uint32_t* dst, const uint16_t* src, int64_t rs, int64_t cs, int64_t kc, int64_t cols) {
  pack_b(dst, src, rs, cs, kc, cols);
}
void pack_b_bf16_panels(uint32_t* dst, int64_t panel, const float* src, int64_t rs, int64_t cs, int64_t kc,
                        int64_t cols) {
  pack_b_panels(dst, panel, src, rs, cs, kc, cols);
}
void pack_b_bf16_panels(uint32_t* dst, int64_t panel, const uint16_t* src, int64_t rs, int64_t cs, int64_t kc,
                        int64_t cols) {
  pack_b_panels(dst, panel, src, rs, cs, kc, cols);
}

namespace {
// 16 floats at p, of which the lanes of m (all unless Masked); bfloat16 ones widened.
template <bool Masked>
inline __m512 load16(const float* p, __mmask16 m) {
  return Masked ? _mm512_maskz_loadu_ps(m, p) : _mm512_loadu_ps(p);
}
template <bool Masked>
inline __m512 load16(const uint16_t* p, __mmask16 m) {
  const __m256i h = Masked ? _mm256_maskz_loadu_epi16(m, p) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Elements [i, i + 32) of round_to_bf16 (with bias, of round_to_bf16_adding), of which the lanes of
// m0 and m1 (masked only at the end of a row: a masked store does not forward to the next row's
// load of the same sums).
template <bool Masked, class Scale>
inline void round32(uint16_t* dst, const float* src, int64_t i, const Scale* scale, float* sum, const float* bias,
                    __mmask16 m0, __mmask16 m1) {
  auto load = [&](const auto* p, __mmask16 m) { return load16<Masked>(p, m); };
  auto store = [&](float* p, __mmask16 m, __m512 x) {
    Masked ? _mm512_mask_storeu_ps(p, m, x) : _mm512_storeu_ps(p, x);
  };
  __m512 x0 = load(src + i, m0), x1 = load(src + i + 16, m1);
  if (bias) x0 = _mm512_add_ps(x0, load(bias + i, m0)), x1 = _mm512_add_ps(x1, load(bias + i + 16, m1));
  if (scale) x0 = _mm512_mul_ps(x0, load(scale + i, m0)), x1 = _mm512_mul_ps(x1, load(scale + i + 16, m1));
  if (sum) {
    store(sum + i, m0, _mm512_add_ps(load(sum + i, m0), x0));
    store(sum + i + 16, m1, _mm512_add_ps(load(sum + i + 16, m1), x1));
  }
  const __m512i h = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(x1, x0));
  if (Masked)
    _mm512_mask_storeu_epi16(dst + i, __mmask32(m0) | (__mmask32(m1) << 16), h);
  else
    _mm512_storeu_si512(dst + i, h);
}
}  // namespace

namespace {
template <class Scale>
void round_rows(uint16_t* dst, const float* src, int64_t n, const Scale* scale, float* sum,
                const float* bias = nullptr) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) round32<false>(dst, src, i, scale, sum, bias, 0xffff, 0xffff);
  if (i < n) round32<true>(dst, src, i, scale, sum, bias, first16(n - i), first16(n - i - 16));
}
}  // namespace

void round_to_bf16_avx512(uint16_t* dst, const float* src, int64_t n, const float* scale, float* sum) {
  round_rows(dst, src, n, scale, sum);
}
void round_to_bf16_avx512(uint16_t* dst, const float* src, int64_t n, const uint16_t* scale, float* sum) {
  round_rows(dst, src, n, scale, sum);
}
void round_to_bf16_adding_avx512(uint16_t* dst, const float* src, const float* bias, int64_t n) {
  round_rows(dst, src, n, static_cast<const float*>(nullptr), nullptr, bias);
}

}  // namespace gmlp::gemm
