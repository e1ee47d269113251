// The micro-kernels of gemm.cpp, each compiled for its instruction set in a file of its own with
// its target flags. fp32 (gemm_avx2.cpp, gemm_avx512.cpp): written once over a vector type, an
// MR × NR tile of C, NR = two vectors, from an A panel packed as a[k·MR + i] and a B panel packed
// as b[k·NR + j]; MR as many rows as the registers hold (MR × 2 accumulators, 2 B vectors, 1
// broadcast): 6 of AVX2's 16, 12 of AVX-512's 32. bf16 (gemm_avx512bf16.cpp): below.
#pragma once

#include <cstdint>

namespace gmlp::gemm {

inline constexpr int kMRAvx2 = 6, kMRAvx512 = 12;

// A full tile: C[i][j] (+)= Σ_k a[k·MR + i] · b[k·NR + j] for i < MR, j < NR.
using Kernel = void (*)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate);
// The same with A read where it lies, row i at a + i·lda, contiguous along k (no packing): the
// same multiply-adds in the same order, so the same bits.
using DirectKernel = void (*)(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc,
                              bool accumulate);

// A is packed (a[k·MR + i]), or with kDirect read in place (a[i·lda + k]). R < MR computes only
// the first R rows, for the last rows of C: each row's sum is the full tile's, so the same bits
// (and the same whatever MR is).
template <class V, int MR, bool kDirect = false, int R = MR>
inline void tile(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate, int64_t lda = 0) {
  constexpr int W = V::width;
  typename V::type s[R][2];
  // The tile of C is written at the end; asking for its lines now hides their miss behind the sum.
  // Its first 6 rows' only: AVX-512's 12-row tile asking for all 24 lines at once ran fc1's
  // forward products about 5 % slower (gMLP-Ti/16 and fmnist-s, 2 threads).
#pragma GCC unroll 6
  for (int i = 0; i < R && i < 6; ++i)
    __builtin_prefetch(c + i * ldc, 1, 3), __builtin_prefetch(c + i * ldc + 2 * W - 1, 1, 3);
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) s[i][0] = V::zero(), s[i][1] = V::zero();
  for (int64_t k = 0; k < kc; ++k) {
    const typename V::type b0 = V::load(b + k * 2 * W), b1 = V::load(b + k * 2 * W + W);
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
      const typename V::type ai = V::broadcast(kDirect ? a + i * lda + k : a + k * MR + i);
      s[i][0] = V::fma(ai, b0, s[i][0]);
      s[i][1] = V::fma(ai, b1, s[i][1]);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) {
    float* row = c + i * ldc;
    if (accumulate) s[i][0] = V::add(s[i][0], V::load(row)), s[i][1] = V::add(s[i][1], V::load(row + W));
    V::store(row, s[i][0]);
    V::store(row + W, s[i][1]);
  }
}

// The first `rows` (1 ≤ rows < MR) rows of a tile, written to c (overwritten).
using EdgeKernel = void (*)(int rows, int64_t kc, const float* a, const float* b, float* c, int64_t ldc);
template <class V, int MR, int R = MR - 1>
inline void tile_rows(int rows, int64_t kc, const float* a, const float* b, float* c, int64_t ldc) {
  if constexpr (R > 1)
    if (rows < R) return tile_rows<V, MR, R - 1>(rows, kc, a, b, c, ldc);
  tile<V, MR, false, R>(kc, a, b, c, ldc, false);
}

// Packing a panel from a matrix stored the other way round, by 8 × 8 transposes in registers
// (gemm_avx2.cpp; used on AVX-512 CPUs too, which all have AVX2).
// B: dst[k·nr + j] = src[j·ld + k] for k < kc, j < cols, and 0 for cols ≤ j < nr (a multiple of 8).
void pack_b_transposed_avx2(float* dst, const float* src, int64_t ld, int64_t kc, int64_t nr, int64_t cols);
// A: dst[k·mr + i] = src[i·ld + k] for i < rows, and 0 for rows ≤ i < mr, k < kc (mr: 6 or 12).
void pack_a_rows_avx2(float* dst, const float* src, int64_t ld, int64_t kc, int rows, int mr);

// The kernels of gemm_avx2.cpp and gemm_avx512.cpp (MR kMRAvx2 and kMRAvx512), and their tile
// widths NR.
void tile_avx2(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate);
void tile_avx512(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate);
void tile_direct_avx2(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc, bool accumulate);
void tile_rows_avx2(int rows, int64_t kc, const float* a, const float* b, float* c, int64_t ldc);
void tile_rows_avx512(int rows, int64_t kc, const float* a, const float* b, float* c, int64_t ldc);
void tile_direct_avx512(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc,
                        bool accumulate);
inline constexpr int kNRAvx2 = 16, kNRAvx512 = 32;

// bf16 (gemm_avx512bf16.cpp, AVX512-BF16): the operands are rounded to bfloat16 (to nearest even)
// as they are packed, two consecutive k in one 32-bit word, the pair vdpbf16ps multiplies and adds
// into an fp32 sum: A panels as a[p·MR + i], B panels as b[p·NR + j] (p = k / 2), zero beyond an
// odd depth and beyond the rows or columns. The tile is 8 × 32: 16 accumulators, enough to keep
// vdpbf16ps's pipes full where 12 were not (its latency is longer than the FMA's).
inline constexpr int kMRBf16 = 8, kNRBf16 = 32;
void tile_bf16(int64_t pairs, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, bool accumulate);
// The tile with A read in place: bfloat16 rows (stored so, core/operand.h), row i's pair p at
// a[i·lda + p], lda in pair words.
void tile_direct_bf16(int64_t pairs, const uint32_t* a, int64_t lda, const uint32_t* b, float* c, int64_t ldc,
                      bool accumulate);
// Its first `rows` (1 ≤ rows < MR) rows, written to c (overwritten).
void tile_rows_bf16(int rows, int64_t pairs, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc);
// Rows [0, rows) × depth [0, kc) of op(A), element (r, k) at src[r·rs + k·cs], into MR-row panels;
// from floats (rounded here) or from bfloat16.
void pack_a_bf16(uint32_t* dst, const float* src, int64_t rs, int64_t cs, int64_t rows, int64_t kc);
void pack_a_bf16(uint32_t* dst, const uint16_t* src, int64_t rs, int64_t cs, int64_t rows, int64_t kc);
// The three tiles in portable code (gemm_emulated.cpp), in vdpbf16ps's order (each pair's odd
// depth's product, then the even's; the pairs in order), C added to the finished sums as above:
// the AVX512-BF16 product's packing and blocking, testable on a CPU without it. To rounding, not to
// the bit, as the AMX tile's emulation (below).
void tile_bf16_emulated(int64_t pairs, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, bool accumulate);
void tile_direct_bf16_emulated(int64_t pairs, const uint32_t* a, int64_t lda, const uint32_t* b, float* c, int64_t ldc,
                               bool accumulate);
void tile_rows_bf16_emulated(int rows, int64_t pairs, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc);
// Depth [0, kc) × columns [0, cols) of op(B), element (k, j) at src[k·rs + j·cs], cols ≤ NR, as one panel.
void pack_b_bf16(uint32_t* dst, const float* src, int64_t rs, int64_t cs, int64_t kc, int64_t cols);
void pack_b_bf16(uint32_t* dst, const uint16_t* src, int64_t rs, int64_t cs, int64_t kc, int64_t cols);
// Columns [0, cols) of op(B), any number, as panels of NR `panel` words apart (each as pack_b_bf16
// packs it, its words beyond the depth's pairs untouched).
void pack_b_bf16_panels(uint32_t* dst, int64_t panel, const float* src, int64_t rs, int64_t cs, int64_t kc,
                        int64_t cols);
void pack_b_bf16_panels(uint32_t* dst, int64_t panel, const uint16_t* src, int64_t rs, int64_t cs, int64_t kc,
                        int64_t cols);

// AMX (gemm_amx.cpp, AMX-BF16): a 32 × 32 tile of C held in four 16 × 16 fp32 accumulator tiles,
// each step of 16 pairs loading two A tiles and two B tiles and running tdpbf16ps four times. B
// panels are the AVX512-BF16 ones (b[p·NR + j], NR = 32: a B tile is 16 of their rows, 128 bytes
// apart) with zero pairs up to a multiple of 16; A panels are 32 rows of pair words stored row
// by row, a[i·pairs + p], zero beyond the rows and the depth, so that a tile of A is 16 rows of 64
// bytes. `pairs` is a multiple of 16. The tile takes A's row stride in pair words, lda: `pairs`
// for a packed panel, or the row stride of bfloat16 rows read in place (32 whole rows, whose
// depth is a multiple of 32), which are already that layout.
inline constexpr int kMRAmx = 32, kAmxPairs = 16;
// Loads gmlp's tile configuration on the calling thread (eight 16 × 64-byte tiles), and releases
// the tiles again; a thread runs tile_amx only between the two.
void amx_configure();
void amx_release();
void tile_amx(int64_t pairs, const uint32_t* a, int64_t lda, const uint32_t* b, float* c, int64_t ldc, bool accumulate);
// The same tile in portable code (gemm_emulated.cpp), in tdpbf16ps's order (each pair's two
// products added in turn, the pairs in order): the AMX product's packing and blocking, testable on
// a CPU without AMX. It keeps denormal operands and sums, which tdpbf16ps flushes to zero, so the
// two agree to rounding, not to the bit.
void tile_amx_emulated(int64_t pairs, const uint32_t* a, int64_t lda, const uint32_t* b, float* c, int64_t ldc,
                       bool accumulate);
// Whether the CPU has AMX-BF16 and Linux grants this process the tile state (asked once).
bool amx_permitted();
// Rows [0, rows) × depth [0, kc) of op(A), element (r, k) at src[r·rs + k·cs] (rs or cs is 1),
// into 32-row panels a[i·pairs + p], pairs = kc / 2 rounded up to a multiple of 16; from floats
// (rounded here, as pack_a_bf16 rounds) or from bfloat16 (gemm_avx512bf16.cpp).
void pack_a_amx(uint32_t* dst, const float* src, int64_t rs, int64_t cs, int64_t rows, int64_t kc);
void pack_a_amx(uint32_t* dst, const uint16_t* src, int64_t rs, int64_t cs, int64_t rows, int64_t kc);

// dst (cols × rows, rows ld_dst apart) = src (rows × cols, rows ld_src apart) transposed, by
// 16 × 16 blocks in registers (gemm_avx512bf16.cpp).
void transpose_avx512(float* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t rows, int64_t cols);

// gemm::round_to_bf16 with AVX512-BF16's vcvtne2ps2bf16 (gemm_avx512bf16.cpp).
void round_to_bf16_avx512(uint16_t* dst, const float* src, int64_t n, const float* scale, float* sum);
void round_to_bf16_avx512(uint16_t* dst, const float* src, int64_t n, const uint16_t* scale, float* sum);
void round_to_bf16_adding_avx512(uint16_t* dst, const float* src, const float* bias, int64_t n);

// The formats' packing and gemm::round_to_bf16 in portable code (gemm_emulated.cpp), for the
// emulated kernels on a CPU without AVX512-BF16: the same words as the functions of those names
// above, rounding as vcvtne2ps2bf16 does (float_to_bf16_daz).
namespace portable {
// Src: float (rounded here) or uint16_t (bfloat16, taken as it is); Scale: float or uint16_t.
template <class Src>
void pack_a_bf16(uint32_t* dst, const Src* src, int64_t rs, int64_t cs, int64_t rows, int64_t kc);
template <class Src>
void pack_a_amx(uint32_t* dst, const Src* src, int64_t rs, int64_t cs, int64_t rows, int64_t kc);
template <class Src>
void pack_b_bf16(uint32_t* dst, const Src* src, int64_t rs, int64_t cs, int64_t kc, int64_t cols);
template <class Scale>
void round_to_bf16(uint16_t* dst, const float* src, int64_t n, const Scale* scale, float* sum);
void round_to_bf16_adding(uint16_t* dst, const float* src, const float* bias, int64_t n);
}  // namespace portable

}  // namespace gmlp::gemm
