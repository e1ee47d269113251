#include "core/gemm.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <type_traits>
#include <utility>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/gemm_kernel.h"

namespace gmlp::gemm {

namespace {

// Blocking (Goto/BLIS): a KC-deep slice of op(B), KC × NC, is packed into NR-wide panels, and
// MC × KC of op(A) into MR-row panels; the kernel runs over every (A panel, B panel) pair. KC × NR
// of B (16 KiB at NR 16) stays in L1 while the A block (96 KiB) sits in L2. With threads, each
// takes a block of C and runs all of this on it alone, with its own buffers: no barrier, no shared
// state, and the same tile grid and sums as one thread, so the same bits. Where op(A)'s rows are
// contiguous and the packed slice of B is small (few columns), A is not packed at all: the kernel
// reads each tile of it in place (macro_direct), with the same sums.
constexpr int64_t kKC = 256, kMC = 96, kNC = 3072;
static_assert(kMC % kMRAvx2 == 0 && kMC % kMRAvx512 == 0 && kMC % kMRBf16 == 0 && kMC % kMRAmx == 0);

struct Isa {
  Kernel kernel = nullptr;
  DirectKernel direct = nullptr;
  EdgeKernel edge = nullptr;
  int64_t mr = 0, nr = 0;
  const char* name = "none";
};

const Isa& isa() {
  static const Isa chosen = [] {
    const CpuFeatures& f = cpu_features();
    if (f.avx512f) return Isa{tile_avx512, tile_direct_avx512, tile_rows_avx512, kMRAvx512, kNRAvx512, "avx512"};
    if (f.avx2) return Isa{tile_avx2, tile_direct_avx2, tile_rows_avx2, kMRAvx2, kNRAvx2, "avx2"};
    return Isa{};
  }();
  return chosen;
}

// Whether the CPU has AVX512-BF16: bf16's native kernels, packing and rounding.
bool native_bf16() { return cpu_features().avx512_bf16; }

// A packed slice of B (KC × NC floats) up to this size stays in L2 while the kernel reads op(A)
// in place, tile by tile (block()).
constexpr int64_t kDirectSliceBytes = 128 * 1024;
// The part of C, at most, that a block's epilogue waits for (block()).
constexpr int64_t kEpilogueBytes = 16 * 1024;
// Where C is stored as bfloat16, the floats of a block of rows are made this many bytes at a time
// in a scratch that stays in L2 (block()).
constexpr int64_t kStoredBlockBytes = 64 * 1024;

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// Words (floats, or bf16 pairs), 64-byte aligned, grown to the largest size asked for and then kept.
template <class Word>
class Buffer {
 public:
  Word* get(int64_t n) {
    if (n > size_) {
      data_.reset(static_cast<Word*>(std::aligned_alloc(64, size_t(round_up(n * int64_t(sizeof(Word)), 64)))));
      if (!data_) throw std::bad_alloc();
      size_ = n;
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(Word* p) const { std::free(p); }
  };
  std::unique_ptr<Word, Free> data_;
  int64_t size_ = 0;
};

// An operand as a strided view: element (r, c) at p[r·rs + c·cs], floats or (bf16) bfloat16.
struct View {
  const void* p;
  int64_t rs, cs;
  bool bf16 = false;
  const float* f() const {
    GMLP_CHECK(!bf16);
    return static_cast<const float*>(p);
  }
  const uint16_t* h() const { return static_cast<const uint16_t*>(p); }
  // The view from element (r, c) on.
  View from(int64_t r, int64_t c) const {
    const int64_t i = r * rs + c * cs;
    return View{bf16 ? static_cast<const void*>(h() + i) : static_cast<const void*>(f() + i), rs, cs, bf16};
  }
  // f(its elements as stored): bfloat16 or floats, for code written over both.
  template <class F>
  void visit(F&& with) const {
    bf16 ? with(h()) : with(f());
  }
};

// Rows [0, rows) × depth [0, kc) of op(A) into MR-row panels: panel t holds a[k·MR + i] for its
// rows t·MR + i, zero beyond `rows`.
template <int MR>
void pack_a(float* dst, View a, int64_t rows, int64_t kc) {
  const float* x = a.f();
  int64_t t = 0;
  if (a.rs == 1) {  // columns contiguous (op(A) = Aᵀ): each panel takes MR consecutive floats per k
    // k outermost: each k's floats of the block are read once, left to right, and dealt out to the
    // panels. Panel by panel, each went down all kc rows again for its MR floats, missing L1 on
    // every row: that pass was a quarter of a weight gradient's product.
    const int64_t full = rows / MR * MR;
    for (int64_t k = 0; k < kc; ++k) {
      const float* src = x + k * a.cs;
      for (int64_t i = 0; i < full; i += MR) std::memcpy(dst + i * kc + k * MR, src + i, MR * sizeof(float));
    }
    t = full, dst += full * kc;
  }
  for (; t < rows; t += MR, dst += MR * kc) {
    const int64_t n = std::min<int64_t>(MR, rows - t);
    if (a.cs == 1) {  // rows contiguous along k
      pack_a_rows_avx2(dst, x + t * a.rs, a.rs, kc, int(n), MR);
      continue;
    }
    for (int64_t k = 0; k < kc; ++k) {
      float* d = dst + k * MR;
      for (int64_t i = 0; i < n; ++i) d[i] = x[(t + i) * a.rs + k * a.cs];
      for (int64_t i = n; i < MR; ++i) d[i] = 0.f;
    }
  }
}

// Depth [0, kc) × columns [0, cols) of op(B), cols ≤ NR, as one panel b[k·NR + j], zero beyond.
void pack_b(float* dst, View b, int64_t kc, int64_t cols, int64_t nr) {
  const float* x = b.f();
  if (b.rs == 1) return pack_b_transposed_avx2(dst, x, b.cs, kc, nr, cols);  // columns along k
  for (int64_t k = 0; k < kc; ++k) {
    float* d = dst + k * nr;
    const float* src = x + k * b.rs;
    if (b.cs == 1 && cols == nr) {  // nr (16 or 32) floats, in copies of a size known here, so inlined
      for (int64_t j = 0; j < nr; j += 16) std::memcpy(d + j, src + j, 16 * sizeof(float));
      continue;
    }
    if (b.cs == 1)
      std::memcpy(d, src, size_t(cols) * sizeof(float));
    else
      for (int64_t j = 0; j < cols; ++j) d[j] = src[j * b.cs];
    std::fill(d + cols, d + nr, 0.f);
  }
}

// Depth [0, kc) × columns [0, nc) of op(B), its rows contiguous (cs = 1), as panels nr wide, kc·nr
// floats apart: each row is read once, left to right, and dealt out to the panels. Panel by panel,
// a weight gradient's B (its output's gradient, thousands of rows) was read 128 bytes a row,
// thousands of bytes apart.
void pack_b_rows(float* dst, View b, int64_t kc, int64_t nc, int64_t nr) {
  const float* x = b.f();
  for (int64_t k = 0; k < kc; ++k) {
    const float* src = x + k * b.rs;
    for (int64_t j = 0; j < nc; j += nr) {
      float* d = dst + j * kc + k * nr;
      const int64_t cols = std::min(nr, nc - j);
      if (cols == nr) {
        for (int64_t q = 0; q < nr; q += 16) std::memcpy(d + q, src + j + q, 16 * sizeof(float));
        continue;
      }
      std::memcpy(d, src + j, size_t(cols) * sizeof(float));
      std::fill(d + cols, d + nr, 0.f);
    }
  }
}

// The two packed formats the blocked product runs on. Each says what a word of a packed panel is,
// how many words a depth of kc takes, how deep a slice of the sum is, how panels are packed and
// which tile multiplies them.
//   F32: floats, one per k; the fp32 FMA tile of the CPU (AVX2's 6 rows or AVX-512's 12). op(A)
//        may be read in place (macro_direct).
//   Bf16: pair words, one per two k (gemm_kernel.h); the AVX512-BF16 tile. A slice twice as deep
//        takes the bytes of an fp32 slice, so the blocks sit in the caches as fp32's do.
template <int MR>
struct F32 {
  using Word = float;
  static constexpr int64_t mr = MR, kc = kKC;
  const Isa& isa;
  static constexpr bool kReadsInPlace = true;
  static constexpr bool kSumsOntoC = false;
  static constexpr bool kTurnsAByTiles = false;
  static constexpr bool kAsksForC = false;  // the kernels ask for their C lines themselves
  // Whether op(A) (rows along k, lda apart) can be read in place; then a full tile of it from a.
  static bool direct(const View& a, int64_t, int64_t) { return a.cs == 1 && !a.bf16; }
  void tile_direct(int64_t kc, const View& a, int64_t i, const float* b, float* c, int64_t ldc, bool accumulate) const {
    isa.direct(kc, a.f() + i * a.rs, a.rs, b, c, ldc, accumulate);
  }
  int64_t nr() const { return isa.nr; }
  static int64_t words(int64_t kc) { return kc; }
  static void pack_a(float* dst, View a, int64_t rows, int64_t kc) { gemm::pack_a<MR>(dst, a, rows, kc); }
  void pack_b(float* dst, View b, int64_t kc, int64_t cols) const { gemm::pack_b(dst, b, kc, cols, isa.nr); }
  // A whole slice's panels, words(kc)·nr apart: row by row where op(B)'s rows are contiguous.
  void pack_b_slice(float* dst, View b, int64_t kc, int64_t nc) const {
    if (b.cs == 1 && nc > isa.nr) return pack_b_rows(dst, b, kc, nc, isa.nr);
    for (int64_t j = 0; j < nc; j += isa.nr) pack_b(dst + j * kc, b.from(0, j), kc, std::min(isa.nr, nc - j));
  }
  void tile(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate) const {
    isa.kernel(kc, a, b, c, ldc, accumulate);
  }
  void tile_rows(int rows, int64_t kc, const float* a, const float* b, float* c, int64_t ldc) const {
    isa.edge(rows, kc, a, b, c, ldc);
  }
  static void begin() {}
  static void end() {}
};

// f(format) for the fp32 format of this CPU's kernel. Without AVX2 there is none (available() is
// false, and matmul.h's products go to oneDNN): a product or pack asked of it here fails, where
// its nr of 0 would divide by zero.
template <class F>
void with_f32_format(F&& f) {
  GMLP_CHECK(isa().kernel != nullptr);
  if (isa().mr == kMRAvx512)
    f(F32<kMRAvx512>{isa()});
  else
    f(F32<kMRAvx2>{isa()});
}

struct Bf16 {
  using Word = uint32_t;
  static constexpr int64_t mr = kMRBf16, kc = 2 * kKC;
  bool emulated;  // its tiles in portable code (gemm_emulated.cpp)
  static constexpr bool kReadsInPlace = true;
  static constexpr bool kSumsOntoC = false;
  static constexpr bool kTurnsAByTiles = false;
  static constexpr bool kAsksForC = false;  // its kernel asks for its C lines itself
  // Rows of bfloat16 are already pair words, when each row starts on a pair word (an aligned start,
  // lda even) and no row's last pair reaches past its end (K even).
  static bool direct(const View& a, int64_t lda, int64_t K) {
    return a.cs == 1 && a.bf16 && reinterpret_cast<uintptr_t>(a.p) % 4 == 0 && lda % 2 == 0 && K % 2 == 0;
  }
  void tile_direct(int64_t kc, const View& a, int64_t i, const uint32_t* b, float* c, int64_t ldc,
                   bool accumulate) const {
    (emulated ? tile_direct_bf16_emulated : tile_direct_bf16)(
        words(kc), reinterpret_cast<const uint32_t*>(a.h() + i * a.rs), a.rs / 2, b, c, ldc, accumulate);
  }
  static int64_t nr() { return kNRBf16; }
  static int64_t words(int64_t kc) { return (kc + 1) / 2; }
  // Packed with AVX512-BF16 where the CPU has it, else in portable code (the same words).
  static void pack_a(uint32_t* dst, View a, int64_t rows, int64_t kc) {
    a.visit([&](const auto* src) {
      native_bf16() ? pack_a_bf16(dst, src, a.rs, a.cs, rows, kc)
                    : portable::pack_a_bf16(dst, src, a.rs, a.cs, rows, kc);
    });
  }
  static void pack_b(uint32_t* dst, View b, int64_t kc, int64_t cols) {
    b.visit([&](const auto* src) {
      native_bf16() ? pack_b_bf16(dst, src, b.rs, b.cs, kc, cols)
                    : portable::pack_b_bf16(dst, src, b.rs, b.cs, kc, cols);
    });
  }
  // Columns [0, nc) of a slice as panels `panel` words apart (AMX's are deeper than words(kc)·nr).
  static void pack_b_panels(uint32_t* dst, int64_t panel, View b, int64_t kc, int64_t nc) {
    if (native_bf16())
      return b.visit([&](const auto* src) { pack_b_bf16_panels(dst, panel, src, b.rs, b.cs, kc, nc); });
    for (int64_t j = 0; j < nc; j += kNRBf16)
      pack_b(dst + j / kNRBf16 * panel, b.from(0, j), kc, std::min<int64_t>(kNRBf16, nc - j));
  }
  static void pack_b_slice(uint32_t* dst, View b, int64_t kc, int64_t nc) {
    pack_b_panels(dst, kNRBf16 * words(kc), b, kc, nc);
  }
  void tile(int64_t kc, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, bool accumulate) const {
    (emulated ? tile_bf16_emulated : tile_bf16)(words(kc), a, b, c, ldc, accumulate);
  }
  void tile_rows(int rows, int64_t kc, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc) const {
    (emulated ? tile_rows_bf16_emulated : tile_rows_bf16)(rows, words(kc), a, b, c, ldc);
  }
  static void begin() {}
  static void end() {}
};

//   Amx: pair words as Bf16's, in panels whose depth is padded to a whole tile (16 pairs), A's
//        stored row by row (gemm_kernel.h), or bfloat16 rows of A read in place where they are
//        that layout already; AMX's 32 × 32 tile, or its scalar emulation. A thread
//        loads the tile configuration when its block begins and releases the tiles when it ends:
//        oneDNN's kernels configure the tiles their own way between gmlp's products.
struct Amx {
  using Word = uint32_t;
  static constexpr int64_t mr = kMRAmx, kc = 2 * kKC;
  bool emulated;
  static constexpr bool kReadsInPlace = true;
  // Rows of bfloat16 are already a panel's layout, rows lda apart instead of `pairs`, when each
  // row starts on a pair word and the depth fills whole tiles (a multiple of 32), so that no tile
  // reads past a row into the next: then A is read in place (tile_amx's lda) and not packed.
  static bool direct(const View& a, int64_t lda, int64_t K) {
    return Bf16::direct(a, lda, K) && K % (2 * kAmxPairs) == 0;
  }
  void tile_direct(int64_t kc, const View& a, int64_t i, const uint32_t* b, float* c, int64_t ldc,
                   bool accumulate) const {
    (emulated ? tile_amx_emulated : tile_amx)(words(kc), reinterpret_cast<const uint32_t*>(a.h() + i * a.rs), a.rs / 2,
                                              b, c, ldc, accumulate);
  }
  // Accumulating, the tile starts from C's values (loaded into the accumulator tiles) and adds each
  // pair's products to them, where the other formats add C to the finished sum.
  static constexpr bool kSumsOntoC = true;
  // Packing op(A) = Aᵀ turns each 16 × 16 block of pair words in registers (pack_a_amx), where
  // op(B) = B from rows only interleaves two rows: see run().
  static constexpr bool kTurnsAByTiles = true;
  // The tile stores its C (32 rows of 128 bytes, a row of C apart) in one go at its end, and waited
  // there for each line not in the caches: the blocks ask for the next tile's lines while this one
  // runs (ask_for_tile), where C is written in floats (not into the L2 scratch of a C stored as
  // bfloat16, where asking made the products 0–7 % slower). On a Xeon with AMX this made fc2's
  // input gradient (K = 128) 1.16–1.6× as fast on fmnist-s and gMLP-Ti/16, 1 and 2 threads.
  static constexpr bool kAsksForC = true;
  static int64_t nr() { return kNRBf16; }
  static int64_t words(int64_t kc) { return round_up((kc + 1) / 2, kAmxPairs); }
  // Packed with AVX512-BF16 where the CPU has it (so that the emulated tile tests those packers
  // too), else in portable code.
  static void pack_a(uint32_t* dst, View a, int64_t rows, int64_t kc) {
    a.visit([&](const auto* src) {
      native_bf16() ? pack_a_amx(dst, src, a.rs, a.cs, rows, kc) : portable::pack_a_amx(dst, src, a.rs, a.cs, rows, kc);
    });
  }
  // Bf16's panels, words(kc)·nr apart, each with zero pairs to its whole depth.
  static void pack_b_slice(uint32_t* dst, View b, int64_t kc, int64_t nc) {
    const int64_t kw = words(kc), pairs = (kc + 1) / 2;
    Bf16::pack_b_panels(dst, kNRBf16 * kw, b, kc, nc);
    for (int64_t j = 0; j < nc; j += kNRBf16)
      std::memset(dst + j * kw + pairs * kNRBf16, 0, size_t((kw - pairs) * kNRBf16) * sizeof(uint32_t));
  }
  static void pack_b(uint32_t* dst, View b, int64_t kc, int64_t cols) { pack_b_slice(dst, b, kc, cols); }
  void tile(int64_t kc, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, bool accumulate) const {
    (emulated ? tile_amx_emulated : tile_amx)(words(kc), a, words(kc), b, c, ldc, accumulate);
  }
  // The panel's rows beyond `rows` are zero: the whole tile, into the edge scratch (mr × nr).
  void tile_rows(int, int64_t kc, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc) const {
    tile(kc, a, b, c, ldc, false);
  }
  void begin() const {
    if (!emulated) amx_configure();
  }
  void end() const {
    if (!emulated) amx_release();
  }
};

// An edge tile's rows × cols of C into its scratch tile (nr wide), zero beyond: where the format's
// tile sums onto C's values (kSumsOntoC), its edge tiles start from them as well.
void load_edge(float* edge, int64_t nr, const float* c, int64_t ldc, int64_t rows, int64_t cols, int64_t mr) {
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t q = 0; q < nr; ++q) edge[r * nr + q] = r < rows && q < cols ? c[r * ldc + q] : 0.f;
}

// An edge tile's rows × cols of its scratch tile (nr wide) added to C or copied there: one
// rounding of C + sum, as the kernel's.
void store_edge(const float* edge, int64_t nr, float* c, int64_t ldc, int64_t rows, int64_t cols, bool accumulate) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t q = 0; q < cols; ++q)
      c[r * ldc + q] = accumulate ? c[r * ldc + q] + edge[r * nr + q] : edge[r * nr + q];
}

// An edge tile (n rows × cols of C, short of a whole tile) through its scratch tile: run(c, ld,
// accumulate) makes a whole tile's sums at c. Where the format's tile sums onto C (kSumsOntoC), the
// scratch starts from C's values, as a whole tile would start, so that each element of C gets the
// same bits wherever its tile falls.
template <class Format, class Run>
void edge_tile(float* edge, int64_t nr, float* cc, int64_t ldc, int64_t n, int64_t cols, bool accumulate,
               const Run& run) {
  if (Format::kSumsOntoC && accumulate) {
    load_edge(edge, nr, cc, ldc, n, cols, Format::mr);
    run(edge, nr, true);
    return store_edge(edge, nr, cc, ldc, n, cols, false);
  }
  run(edge, nr, false);
  store_edge(edge, nr, cc, ldc, n, cols, accumulate);
}

// Asks for the cache line at p, to be written (prefetchw). As an asm statement: GCC 12 at -O1 and
// above deleted __builtin_prefetch from ask_for_tile's loops as having no effect.
inline void prefetch_for_write(const float* p) {
#if defined(__x86_64__)
  asm volatile("prefetchw %0" : : "m"(*p));
#else
  __builtin_prefetch(p, 1, 3);
#endif
}
// Asks for the lines of the tile of C at (i, j) of a block (rows × cols), to be written, where
// the format wants it (kAsksForC) and the tile lies in the block. The blocks ask for the tile
// after the one they run, with ask_for_c: where C is written in floats.
template <class Format>
void ask_for_tile(const Format& f, const float* c, int64_t ldc, int64_t rows, int64_t cols, int64_t i, int64_t j) {
  if constexpr (Format::kAsksForC) {
    if (i >= rows || j >= cols) return;
    const int64_t n = std::min(Format::mr, rows - i), width = std::min(f.nr(), cols - j);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t q = 0; q < width; q += 16) prefetch_for_write(c + (i + r) * ldc + j + q);
  }
}

// C[0, rows) × [j0, j1) of a block, from its packed A (rows × kc) and packed B (kc × nc).
template <class Format, class Word = typename Format::Word>
void macro(const Format& f, int64_t rows, int64_t nc, int64_t kc, const Word* ap, const Word* bp, float* c, int64_t ldc,
           bool accumulate, int64_t j0, int64_t j1, bool ask_for_c = false) {
  alignas(64) float edge[kMRAmx * kNRAvx512];
  static_assert(kMRAmx >= kMRAvx512 && kMRAmx >= kMRBf16 && kNRAvx512 >= kNRBf16);
  const int64_t nr = f.nr(), kw = f.words(kc);
  for (int64_t j = j0; j < j1; j += nr) {
    const int64_t cols = std::min(nr, nc - j);
    for (int64_t i = 0; i < rows; i += Format::mr) {
      const int64_t n = std::min(Format::mr, rows - i);
      const Word* a = ap + i * kw;
      const Word* b = bp + j * kw;
      float* cc = c + i * ldc + j;
      if (ask_for_c)
        ask_for_tile(f, c, ldc, rows, j1, i + Format::mr < rows ? i + Format::mr : 0,
                     i + Format::mr < rows ? j : j + nr);
      if (n == Format::mr && cols == nr) {
        f.tile(kc, a, b, cc, ldc, accumulate);
        continue;
      }
      edge_tile<Format>(edge, nr, cc, ldc, n, cols, accumulate, [&](float* e, int64_t ld, bool from_c) {
        if (n == Format::mr || from_c)
          f.tile(kc, a, b, e, ld, from_c);
        else
          f.tile_rows(int(n), kc, a, b, e, ld);
      });
    }
  }
}

// C[0, rows) × [0, nc) of a block, from op(A) read in place (rows contiguous along k, a.rs apart)
// and packed B (kc × nc): each full MR-row tile of A is read from memory once and stays in L1
// across the panels of B, where packing it first cost a pass over A (which, at few columns,
// was a fifth of the product's time). Rows beyond the last full tile are packed as before.
template <class Format, class Word = typename Format::Word>
void macro_direct(const Format& f, int64_t rows, int64_t nc, int64_t kc, const View& a, Word* ap, const Word* bp,
                  float* c, int64_t ldc, bool accumulate, bool ask_for_c = false) {
  alignas(64) float edge[kMRAmx * kNRAvx512];
  const int64_t nr = f.nr(), kw = f.words(kc), full = rows / Format::mr * Format::mr;
  for (int64_t i = 0; i < full; i += Format::mr)
    for (int64_t j = 0; j < nc; j += nr) {
      const int64_t cols = std::min(nr, nc - j);
      float* cc = c + i * ldc + j;
      if (ask_for_c) ask_for_tile(f, c, ldc, full, nc, j + nr < nc ? i : i + Format::mr, j + nr < nc ? j + nr : 0);
      if (cols == nr) {
        f.tile_direct(kc, a, i, bp + j * kw, cc, ldc, accumulate);
        continue;
      }
      edge_tile<Format>(edge, nr, cc, ldc, Format::mr, cols, accumulate, [&](float* e, int64_t ld, bool from_c) {
        f.tile_direct(kc, a, i, bp + j * kw, e, ld, from_c);
      });
    }
  if (full == rows) return;
  f.pack_a(ap, a.from(full, 0), rows - full, kc);
  macro(f, rows - full, nc, kc, ap, bp, c + full * ldc, ldc, accumulate, 0, nc, ask_for_c);
}

// The product with op(A), op(B) and C as strided views; every thread runs `block` on its own part.
struct Problem {
  int64_t K;
  View a, b;
  bool accumulate;
  float* C;
  int64_t ldc;
  const Epilogue* epilogue;
  const Packed* packed_a = nullptr;  // op(A) packed beforehand (a unused), or null
  const Packed* packed_b = nullptr;  // op(B) packed beforehand (b unused), or null
  // C stored as bfloat16 here instead (C unused), rows ldc apart: then the sum is one slice of
  // depth (K <= the format's kc) and overwrites C.
  uint16_t* C16 = nullptr;
};

// With C stored as bfloat16, this thread's floats of the part of C that finish() waits for.
float* stored_block(int64_t n) {
  thread_local Buffer<float> block;
  // NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the analyzer ends a thread_local's life at the return
  return block.get(n);
}

// A block of C whose sums are final, lying at c (rows ld apart): the epilogue on it, then, where C
// is stored as bfloat16, its rows rounded there.
void finish(const Problem& p, float* c, int64_t ld, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  const float* bias = p.epilogue ? p.epilogue->bias() : nullptr;
  if (p.C16 && bias) {  // the bias added as the block is rounded (Epilogue::column_bias)
    for (int64_t r = r0; r < r1; ++r)
      round_to_bf16_adding(p.C16 + r * p.ldc + c0, c + (r - r0) * ld, bias + c0, c1 - c0);
    return;
  }
  if (p.epilogue) (*p.epilogue)(Block{c, ld, r0, r1, c0, c1});
  if (p.C16)
    for (int64_t r = r0; r < r1; ++r) round_to_bf16(p.C16 + r * p.ldc + c0, c + (r - r0) * ld, c1 - c0);
}

// C[i0, i1) × [j0, j1) on the calling thread.
template <class Format>
void block(const Format& f, const Problem& p, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  using Word = typename Format::Word;
  thread_local Buffer<Word> a_buffer, b_buffer;
  const int64_t M = i1 - i0, nr = f.nr();
  // Rows that fit one A block take each B panel straight from packing to use, while it is in
  // L1; otherwise a whole KC × NC slice of B is packed for the A blocks to share. One block takes
  // up to a tile's rows less than two: a last block of a few rows (gMLP-Ti/16's 196 rows at batch
  // 1 are 96 and 100 on two threads, the 100 a block of 96 and one of 4) made the thread that
  // had it run a second pass over the whole of B, and the other thread wait.
  const int64_t max_block = kMC + Format::mr - 1;
  const bool one_block = M <= max_block;
  // Buffers of the largest block, not of this product's: products whose shapes vary from call to
  // call (the masked-token head's rows) then allocate nothing after the first.
  const int64_t kw_max = f.words(Format::kc);
  Word* ap = a_buffer.get(round_up(max_block, Format::mr) * kw_max);
  Word* bp = b_buffer.get(kw_max * (one_block ? nr : kNC));
  f.begin();
  for (int64_t jc = j0; jc < j1; jc += kNC) {
    const int64_t nc = std::min(kNC, j1 - jc);
    for (int64_t pc = 0; pc < p.K; pc += Format::kc) {
      const int64_t kc = std::min(Format::kc, p.K - pc), kw = f.words(kc);
      const bool accumulate = p.accumulate || pc > 0;
      const bool finishing = pc + kc == p.K && (p.epilogue || p.C16);  // the blocks of the last slice
      auto b_panel = [&](int64_t j) { return p.b.from(pc, jc + j); };  // columns [j, j + nr) of this slice of op(B)
      // This slice of op(B), packed beforehand or here.
      const Word* slice = p.packed_b ? static_cast<const Word*>(p.packed_b->slice(jc, pc)) : bp;
      // Rows [i, i + rows) of this slice of op(A), packed here, or where a pack made beforehand
      // holds them (i is a multiple of the tile's rows: the threads' shares and blocks are).
      const Word* a_slice = p.packed_a ? static_cast<const Word*>(p.packed_a->slice(0, pc)) : nullptr;
      auto a_block = [&](int64_t i, int64_t rows) -> const Word* {
        if (a_slice) return a_slice + i * kw;
        f.pack_a(ap, p.a.from(i, pc), rows, kc);
        return ap;
      };
      if (one_block) {
        const Word* a = a_block(i0, M);
        // The epilogue runs on groups of panels whose part of C is still in L1: panel by panel,
        // its calls on rows of 16 columns cost more than the work they did.
        // Stored as bfloat16, the group's floats lie in the scratch until then.
        const int64_t group = std::max(nr, kEpilogueBytes / (M * int64_t(sizeof(float))) / nr * nr);
        const int64_t lds = group + nr;
        float* scratch = p.C16 ? stored_block(M * lds) : nullptr;
        int64_t done = 0;  // columns finished
        // Where column q of the block lies: in C, or in the scratch (C16's sums are one slice).
        const int64_t ld = p.C16 ? lds : p.ldc;
        auto at = [&](int64_t q) { return p.C16 ? scratch + (q - done) : p.C + i0 * p.ldc + jc + q; };
        for (int64_t j = 0; j < nc; j += nr) {
          const int64_t cols = std::min(nr, nc - j);
          if (!p.packed_b) f.pack_b(bp, b_panel(j), kc, cols);
          const Word* panel = p.packed_b ? slice + j * kw : bp;
          macro(f, M, cols, kc, a, panel, at(j), ld, accumulate, 0, cols, !p.C16);
          if (finishing && (j + cols - done >= group || j + cols == nc)) {
            finish(p, at(done), ld, i0, i1, jc + done, jc + j + cols);
            done = j + cols;
          }
        }
        continue;
      }
      if (!p.packed_b) f.pack_b_slice(bp, b_panel(0), kc, nc);
      bool direct = false;  // whether op(A) is read in place
      if constexpr (Format::kReadsInPlace)
        direct = !p.packed_a && Format::direct(p.a, p.a.rs, p.K) &&
                 kw * round_up(nc, nr) * int64_t(sizeof(Word)) <= kDirectSliceBytes;
      for (int64_t ic = i0; ic < i1; ic += kMC) {
        const int64_t rows = std::min(kMC, i1 - ic);
        const Word* a = direct ? nullptr : a_block(ic, rows);
        // The block's columns in one part written into C, or where C is stored as bfloat16 in
        // parts whose floats stay in L2, each rounded into C once finished.
        const int64_t width = p.C16 ? std::max(nr, kStoredBlockBytes / (rows * int64_t(sizeof(float))) / nr * nr) : nc;
        float* scratch = p.C16 ? stored_block(rows * width) : nullptr;
        const int64_t ld = p.C16 ? width : p.ldc;
        for (int64_t j = 0; j < nc; j += width) {
          const int64_t w = std::min(width, nc - j);
          float* c = p.C16 ? scratch : p.C + ic * p.ldc + jc + j;
          [&] {
            if constexpr (Format::kReadsInPlace)
              if (direct)
                return macro_direct(f, rows, w, kc, p.a.from(ic, pc), ap, slice + j * kw, c, ld, accumulate, !p.C16);
            macro(f, rows, w, kc, a, slice + j * kw, c, ld, accumulate, 0, w, !p.C16);
          }();
          if (finishing) finish(p, c, ld, ic, ic + rows, jc + j, jc + j + w);
        }
      }
    }
  }
  f.end();
}

// [lo, hi) of the part t of `threads` of n items cut at multiples of `unit`.
std::pair<int64_t, int64_t> share(int64_t n, int64_t unit, int t, int threads) {
  const int64_t units = (n + unit - 1) / unit;
  return {std::min(n, units * t / threads * unit), std::min(n, units * (t + 1) / threads * unit)};
}

// dst (cols × rows, ld_dst) = srcᵀ (rows × cols, ld_src): in registers where the CPU has
// AVX512-BF16, else (the emulated AMX format's tests) element by element.
void transpose(float* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t rows, int64_t cols) {
  if (native_bf16()) return transpose_avx512(dst, ld_dst, src, ld_src, rows, cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[j * ld_dst + i] = src[i * ld_src + j];
}

// The whole product in a format, on the threads of the calling context.
template <class Format>
void run(const Format& f, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, Operand<float> A, int64_t lda,
         Operand<float> B, int64_t ldb, bool accumulate, Output<float> out, int64_t ldc, const Epilogue* epilogue,
         const Packed* packed_a = nullptr, const Packed* packed_b = nullptr) {
  if (M <= 0 || N <= 0) return;
  GMLP_CHECK(!(out.is_bf16() && accumulate));
  if (out.is_bf16() && (K <= 0 || K > Format::kc)) {
    // A sum of several slices (or none), stored as bfloat16: made whole in floats first, then
    // rounded, the same bits as a product whose C is rounded afterwards.
    thread_local Buffer<float> whole;
    float* C = whole.get(M * N);
    run(f, trans_a, trans_b, M, N, K, A, lda, B, ldb, false, C, N, epilogue, packed_a, packed_b);
    return round_rows_to_bf16(out.bf16_data(), ldc, C, N, M, N);
  }
  float* C = out.is_bf16() ? nullptr : out.data();
  if (K <= 0) {  // an empty sum
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i) std::memset(C + i * ldc, 0, size_t(N) * sizeof(float));
    if (epilogue) (*epilogue)(Block{C, ldc, 0, M, 0, N});
    return;
  }
  // C = Aᵀ·B where A is the wider operand (a linear layer's weight gradient dyᵀ·x when its output
  // is wider than its input), on one thread (as the layers' weight gradients run, each thread on
  // a part of the sum): made as Cᵀ = Bᵀ·A, so that the narrower operand is the one turned while
  // it is packed. The same products in the same order, so the same bits. On a Xeon with AMX this
  // made fc1's weight gradient 1.1–1.5× as fast on one thread (fmnist-s, cifar-s and gMLP-Ti/16);
  // on two, which would each turn all of B, it was slower (0.82–0.90×).
  const int threads = omp_in_parallel() || M * N * K <= kSerialProduct ? 1 : omp_get_max_threads();
  if constexpr (Format::kTurnsAByTiles)
    if (threads == 1 && trans_a && !trans_b && M >= 2 * N && !out.is_bf16() && !epilogue && !packed_a && !packed_b) {
      thread_local Buffer<float> turned;
      float* T = turned.get(N * M);
      if (accumulate) transpose(T, M, C, ldc, M, N);
      run(f, true, false, N, M, K, B, ldb, A, lda, accumulate, T, M, nullptr);
      return transpose(C, ldc, T, M, N, M);
    }
  const Problem p{K,
                  View{A.address(), trans_a ? 1 : lda, trans_a ? lda : 1, A.is_bf16()},
                  View{B.address(), trans_b ? 1 : ldb, trans_b ? ldb : 1, B.is_bf16()},
                  accumulate,
                  C,
                  ldc,
                  epilogue,
                  packed_a,
                  packed_b,
                  out.is_bf16() ? out.bf16_data() : nullptr};
  if (threads == 1) return block(f, p, 0, M, 0, N);
  // Threads split the longer side of C, so that the operand each of them packs again is the
  // smaller one; with an operand packed beforehand, that operand's side, so that neither packs
  // what the other packs too (the slices of a packed B also start at its first column).
  const bool by_rows = packed_b || (!packed_a && M >= N);
#pragma omp parallel num_threads(threads)
  {
    const auto [lo, hi] =
        share(by_rows ? M : N, by_rows ? Format::mr : f.nr(), omp_get_thread_num(), omp_get_num_threads());
    if (lo < hi) by_rows ? block(f, p, lo, hi, 0, N) : block(f, p, 0, M, lo, hi);
  }
}

Bf16Kernel g_bf16_kernel = Bf16Kernel::automatic;
// Off unless set_bf16_emulated turns it on, or the environment does for a whole process: with
// GMLP_TEST_BF16_EMULATED=1 the command-line tests run bf16 end to end on any CPU.
bool g_bf16_emulated = [] {
  const char* v = std::getenv("GMLP_TEST_BF16_EMULATED");
  return v && std::string_view(v) == "1";
}();

// f(format) for the bf16 format of `kernel`.
template <class F>
void with_bf16_format(Bf16Kernel kernel, F&& f) {
  if (kernel == Bf16Kernel::avx512_bf16 || kernel == Bf16Kernel::avx512_bf16_emulated)
    f(Bf16{kernel == Bf16Kernel::avx512_bf16_emulated});
  else
    f(Amx{kernel == Bf16Kernel::amx_emulated});
}

}  // namespace

bool available() { return isa().kernel != nullptr; }
const char* kernel_name() { return isa().name; }
bool bf16_available() { return native_bf16() || g_bf16_emulated; }
void set_bf16_emulated(bool on) { g_bf16_emulated = on; }
bool amx_available() { return native_bf16() && amx_permitted(); }

void set_bf16_kernel(Bf16Kernel k) {
  GMLP_CHECK(k != Bf16Kernel::amx || amx_available());
  GMLP_CHECK(k != Bf16Kernel::avx512_bf16 || native_bf16());
  g_bf16_kernel = k;
}
Bf16Kernel bf16_kernel() {
  if (g_bf16_kernel != Bf16Kernel::automatic) return g_bf16_kernel;
  return amx_available() ? Bf16Kernel::amx : native_bf16() ? Bf16Kernel::avx512_bf16 : Bf16Kernel::amx_emulated;
}

const char* bf16_kernel_name() {
  switch (bf16_kernel()) {
    case Bf16Kernel::amx: return "amx";
    case Bf16Kernel::amx_emulated: return "amx (emulated)";
    case Bf16Kernel::avx512_bf16_emulated: return "avx512_bf16 (emulated)";
    default: return "avx512_bf16";
  }
}

void round_to_bf16(uint16_t* dst, const float* src, int64_t n, const float* scale, float* sum) {
  native_bf16() ? round_to_bf16_avx512(dst, src, n, scale, sum) : portable::round_to_bf16(dst, src, n, scale, sum);
}
void round_to_bf16(uint16_t* dst, const float* src, int64_t n, const uint16_t* scale, float* sum) {
  native_bf16() ? round_to_bf16_avx512(dst, src, n, scale, sum) : portable::round_to_bf16(dst, src, n, scale, sum);
}

void round_to_bf16_adding(uint16_t* dst, const float* src, const float* bias, int64_t n) {
  native_bf16() ? round_to_bf16_adding_avx512(dst, src, bias, n) : portable::round_to_bf16_adding(dst, src, bias, n);
}

Epilogue Epilogue::column_bias(const float* bias) {
  Epilogue e;
  e.f_ = e.bias_ = bias;
  e.call_ = [](const void* f, const Block& b) {
    const float* bias = static_cast<const float*>(f) + b.c0;
    for (int64_t r = b.r0; r < b.r1; ++r) {
      float* row = b.row<float>(r);
#pragma omp simd
      for (int64_t j = 0; j < b.c1 - b.c0; ++j) row[j] += bias[j];
    }
  };
  return e;
}

void round_rows_to_bf16(uint16_t* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t rows, int64_t cols) {
  const bool spread = !omp_in_parallel() && rows * cols >= (int64_t(1) << 15);
#pragma omp parallel for schedule(static) if (spread)
  for (int64_t i = 0; i < rows; ++i) round_to_bf16(dst + i * ld_dst, src + i * ld_src, cols);
}

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
           int64_t ldb, bool accumulate, float* C, int64_t ldc, const Epilogue* epilogue) {
  with_f32_format(
      [&](const auto& f) { run(f, trans_a, trans_b, M, N, K, A, lda, B, ldb, accumulate, C, ldc, epilogue); });
}

void bf16gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, Operand<float> A, int64_t lda,
              Operand<float> B, int64_t ldb, bool accumulate, Output<float> C, int64_t ldc, const Epilogue* epilogue) {
  GMLP_CHECK(bf16_available());
  with_bf16_format(bf16_kernel(), [&](const auto& f) {
    run(f, trans_a, trans_b, M, N, K, A, lda, B, ldb, accumulate, C, ldc, epilogue);
  });
}

void Packed::Free::operator()(void* p) const { std::free(p); }

Packed::Packed(Side side, bool bf16, bool trans, int64_t rows, int64_t cols, const float* X, int64_t ld)
    : side_(side), bf16_(bf16), trans_(trans), rows_(rows), cols_(cols), kc_(bf16 ? Bf16::kc : kKC) {
  static_assert(Bf16::kc == Amx::kc && F32<kMRAvx2>::kc == kKC && F32<kMRAvx512>::kc == kKC);
  GMLP_CHECK(rows > 0 && cols > 0 && (bf16 ? bf16_available() : available()));
  slices_k_ = (K() + kc_ - 1) / kc_;
  repack(X, ld);
}

void Packed::repack(const float* X, int64_t ld) {
  kernel_ = bf16_kernel();
  const View x{X, trans_ ? 1 : ld, trans_ ? ld : 1, false};
  // Each slice as block() packs one: B's panels nr apart, words(kc) × nr words each; A's whole
  // rows in panels of mr, words(kc) × mr words each. B's slices go across its columns too.
  const int64_t K = this->K(), width = side_ == Side::b ? cols_ : 1;
  auto each_slice = [&](auto&& f, auto&& visit) {
    for (int64_t jc = 0; jc < width; jc += kNC)
      for (int64_t pc = 0; pc < K; pc += kc_) visit(f, jc, std::min(kNC, width - jc), pc, std::min(kc_, K - pc));
  };
  auto pack = [&](const auto& f) {
    using Format = std::decay_t<decltype(f)>;
    using Word = typename Format::Word;
    offsets_.assign(1, 0);
    each_slice(f, [&](const auto& f, int64_t, int64_t nc, int64_t, int64_t kc) {
      // B's columns, or A's rows, padded to whole panels.
      const int64_t padded = side_ == Side::b ? round_up(nc, f.nr()) : round_up(rows_, Format::mr);
      offsets_.push_back(offsets_.back() + size_t(padded * f.words(kc)) * sizeof(Word));
    });
    const size_t bytes = size_t(round_up(int64_t(offsets_.back()), 64));
    if (bytes > capacity_) {
      data_.reset(std::aligned_alloc(64, bytes));
      if (!data_) throw std::bad_alloc();
      capacity_ = bytes;
    }
    size_t s = 0;
    each_slice(f, [&](const auto& f, int64_t jc, int64_t nc, int64_t pc, int64_t kc) {
      Word* dst = reinterpret_cast<Word*>(static_cast<char*>(data_.get()) + offsets_[s++]);
      if (side_ == Side::a) return f.pack_a(dst, x.from(0, pc), rows_, kc);
      f.pack_b_slice(dst, x.from(pc, jc), kc, nc);
    });
  };
  if (bf16_)
    with_bf16_format(kernel_, pack);
  else
    with_f32_format(pack);
}

const void* Packed::slice(int64_t jc, int64_t pc) const {
  return static_cast<const char*>(data_.get()) + offsets_[size_t(jc / kNC * slices_k_ + pc / kc_)];
}

namespace {
// f(format) for the format a pack was made in.
template <class F>
void with_format(const Packed& p, F&& f) {
  if (p.bf16())
    with_bf16_format(p.kernel(), f);
  else
    with_f32_format(f);
}
}  // namespace

void multiply(bool trans_a, int64_t M, Operand<float> A, int64_t lda, const Packed& B, bool accumulate, Output<float> C,
              int64_t ldc, const Epilogue* epilogue) {
  GMLP_CHECK(B.side() == Side::b);
  with_format(B, [&](const auto& f) {
    run(f, trans_a, false, M, B.cols(), B.K(), A, lda, nullptr, 0, accumulate, C, ldc, epilogue, nullptr, &B);
  });
}

void multiply(const Packed& A, bool trans_b, int64_t N, Operand<float> B, int64_t ldb, bool accumulate, Output<float> C,
              int64_t ldc, const Epilogue* epilogue) {
  GMLP_CHECK(A.side() == Side::a);
  with_format(A, [&](const auto& f) {
    run(f, false, trans_b, A.rows(), N, A.K(), nullptr, 0, B, ldb, accumulate, C, ldc, epilogue, &A, nullptr);
  });
}

}  // namespace gmlp::gemm
