// gmlp's own matrix product, C = op(A)·op(B) (+ C) on float operands, for the CPUs it runs on:
// in fp32 with AVX2 + FMA or AVX-512 kernels picked at run time, and in bf16 (the operands
// rounded to bfloat16, fp32 sums) with an AVX512-BF16 kernel. It packs the operands into buffers that
// each thread keeps between calls, so once the shapes of a training step have been seen it
// allocates nothing, and inside a parallel region it runs on the calling thread alone (no nested
// team). Every element's sum runs over k in order, in the same blocks whatever the thread count,
// so the result does not depend on the number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/operand.h"

namespace gmlp::gemm {

// A block of C as an epilogue sees it: rows [r0, r1) and columns [c0, c1) of C, whose element
// (r0, c0) lies at `at`, rows ld apart. That is C itself, or the product's float scratch where C
// is stored as bfloat16 (the product rounds the block into C once the epilogue is done). `at` is
// a float block, or a double one for matmul<double>.
struct Block {
  void* at;
  int64_t ld, r0, r1, c0, c1;
  // Row r of the block, from column c0.
  template <class T>
  T* row(int64_t r) const {
    return static_cast<T*>(at) + (r - r0) * ld;
  }
};

// Elementwise work on C after its product (a fused epilogue, as oneDNN's post-ops): called with
// blocks of C once their sums are complete, block by block while the block is still in cache,
// from the thread that computed it. Every element passes through it exactly once, so it must
// treat each element on its own. A reference to a callable f(const Block&) that outlives it (a
// named lambda): unlike std::function it never allocates, which a training step must not.
class Epilogue {
 public:
  template <class F>
  explicit Epilogue(const F& f)
      : f_(&f), call_([](const void* f, const Block& b) { (*static_cast<const F*>(f))(b); }) {}
  template <class F>
  Epilogue(const F&& f) = delete;  // a temporary would be gone before the product calls it
  // C[r][c] += bias[c] on float blocks (a layer's bias, and nothing else after its product). A
  // product storing C as bfloat16 adds it in the pass that rounds each block into C
  // (round_to_bf16_adding), where a pass of its own over the block's floats first cost fc1's
  // forward a fifth of its time: the same bits.
  static Epilogue column_bias(const float* bias);
  void operator()(const Block& b) const { call_(f_, b); }
  // The bias of a column_bias epilogue, else null.
  const float* bias() const { return bias_; }

 private:
  Epilogue() = default;
  const void* f_ = nullptr;
  void (*call_)(const void*, const Block&) = nullptr;
  const float* bias_ = nullptr;
};

// f32 products with at most this many multiply-adds (about 25 µs on one Zen 3 core) run
// single-threaded, here and in oneDNN's sgemm (core/matmul.cpp). At 2^22 every product of a
// batch-1 inference on fmnist-s and cifar-s (49 or 64 rows) ran on one thread. At 2^20 their fc1
// and fc2 use both, and batch 1 went from 720–1,000 to 1,390–1,440 images/s on fmnist-s and from
// 670–720 to 820–1,040 on cifar-s (three paired runs each on an AVX2 Zen 3, oneDNN's sgemm). The
// channel products of training and batched inference on the bench presets all exceed 2^22.
inline constexpr int64_t kSerialProduct = int64_t(1) << 20;

// Whether this CPU has a kernel (AVX2 with FMA, or AVX-512); without one sgemm must not be called.
bool available();
// The kernel sgemm runs here: "avx512", "avx2" or "none".
const char* kernel_name();

// Row-major: op(A) is M×K (A stored K×M when trans_a), op(B) is K×N (B stored N×K when trans_b),
// C is M×N; lda, ldb, ldc are the stored row strides. accumulate: C += op(A)·op(B), else
// C = op(A)·op(B) (C is never read, so it may hold anything). Runs on the threads of the calling
// context (omp_get_max_threads()), on one inside a parallel region. epilogue, when given, runs on
// every block of C once it is final.
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
           int64_t ldb, bool accumulate, float* C, int64_t ldc, const Epilogue* epilogue = nullptr);

// Whether bf16gemm can run: the CPU has AVX512-BF16, or the emulation is on.
bool bf16_available();
// Lets bf16gemm run on a CPU without AVX512-BF16: AMX's format with its tile
// instruction in portable code (Bf16Kernel::amx_emulated), packed and rounded by portable code
// that gives the words the instructions give. So the bf16 paths of the products and of every op
// that stores bf16 run, and are tested, on any CPU; at a small fraction of fp32's speed, so no
// precision a user asks for picks it (matmul.h's cpu_has_bf16 stays false). Off by default
// (GMLP_TEST_BF16_EMULATED=1 in the environment turns it on for a process, and --precision bf16
// then runs emulated); on a CPU with AVX512-BF16 it changes nothing.
void set_bf16_emulated(bool on);
// Whether bf16gemm can run on AMX's tiles: the CPU has AMX-BF16 (and AVX512-BF16, which packs the
// panels) and Linux grants this process the tile state.
bool amx_available();
// The kernel bf16gemm multiplies with. automatic: AMX where amx_available(), else AVX512-BF16,
// else (set_bf16_emulated) amx_emulated. amx_emulated and avx512_bf16_emulated run the AMX or the
// AVX512-BF16 product's packing and blocking with its tile instruction in portable code, so that a
// CPU without it tests them; they are for tests, and slow. avx512_bf16 needs the CPU's AVX512-BF16.
enum class Bf16Kernel { automatic, avx512_bf16, amx, amx_emulated, avx512_bf16_emulated };
void set_bf16_kernel(Bf16Kernel k);
Bf16Kernel bf16_kernel();  // the kernel in use (never automatic)
const char* bf16_kernel_name();
// sgemm's product with both operands rounded to bfloat16 (to nearest even) as they are packed and
// the sums in fp32 (AVX512-BF16's vdpbf16ps, or AMX's tdpbf16ps: bf16_kernel()): what a bf16 ×
// bf16 → fp32 product gives, without a rounded copy of either operand. An operand stored as
// bfloat16 is packed as it is: the same bits as on the floats round_to_bf16 made it from. Same
// blocking, threads, determinism and epilogue as sgemm. C may be stored as bfloat16 (not with
// accumulate): each block is rounded there after the epilogue (core/operand.h's Output).
void bf16gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, Operand<float> A, int64_t lda,
              Operand<float> B, int64_t ldb, bool accumulate, Output<float> C, int64_t ldc,
              const Epilogue* epilogue = nullptr);
// dst[i] = src[i] rounded to bfloat16 as bf16gemm rounds while it packs (vcvtne2ps2bf16), for ops
// that store an activation as bf16. With scale, src[i]·scale[i] is rounded instead, and with sum,
// also added to sum[i] (in fp32): a scaled row stored and summed into a column sum in one pass.
// The scale may be stored as bfloat16. Runs on any CPU: a CPU without AVX512-BF16 runs portable
// code that rounds as the instruction does (bf16.h's float_to_bf16_daz).
void round_to_bf16(uint16_t* dst, const float* src, int64_t n, const float* scale = nullptr, float* sum = nullptr);
void round_to_bf16(uint16_t* dst, const float* src, int64_t n, const uint16_t* scale, float* sum = nullptr);
// dst[i] = src[i] + bias[i] (in fp32) rounded as round_to_bf16 rounds: a block of C and its bias.
void round_to_bf16_adding(uint16_t* dst, const float* src, const float* bias, int64_t n);
// round_to_bf16 on a rows × cols matrix: src's rows (ld_src apart) into dst's (ld_dst apart), the
// rows shared by the threads where the matrix is large and the call is outside a parallel region.
void round_rows_to_bf16(uint16_t* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t rows, int64_t cols);

// Which operand of a product a pack is.
enum class Side { a, b };

// One operand packed once, for products that multiply by the same matrix again and again (a
// layer's weights in an inference-only process as B, the gate's token-mixing weight as A): the
// panels sgemm or bf16gemm would pack on every call, laid out in the order they take them. Holds
// its own copy: the matrix may change or go afterwards.
class Packed {
 public:
  // op(X), rows × cols (M × K as A, K × N as B), X stored transposed when trans, row stride ld.
  // bf16: packed for bf16gemm's format (rounded to bfloat16) of the kernel in use, else for sgemm's.
  Packed(Side side, bool bf16, bool trans, int64_t rows, int64_t cols, const float* X, int64_t ld);
  // Packs X (of the same shape and layout) again, in the format of the bf16 kernel in use now,
  // into the buffer it has where that is large enough: a weight packed again on every call
  // allocates only the first time.
  void repack(const float* X, int64_t ld);
  Side side() const { return side_; }
  bool bf16() const { return bf16_; }
  Bf16Kernel kernel() const { return kernel_; }  // bf16's kernel, whose format it is packed in
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t K() const { return side_ == Side::a ? cols_ : rows_; }
  size_t bytes() const { return offsets_.back(); }
  // The packed slice of depths [pc, pc + KC): as B, of columns [jc, jc + NC); as A, all its rows
  // (jc 0). jc and pc are multiples of the blocking's NC and KC.
  const void* slice(int64_t jc, int64_t pc) const;

 private:
  struct Free {
    void operator()(void* p) const;
  };
  Side side_;
  bool bf16_, trans_;
  Bf16Kernel kernel_;
  int64_t rows_, cols_, kc_, slices_k_;
  std::vector<size_t> offsets_;  // bytes, one a slice and the end
  std::unique_ptr<void, Free> data_;
  size_t capacity_ = 0;  // bytes at data_
};

// C = op(A)·B (+ C) with B packed beforehand, or C = A·op(B) (+ C) with A packed beforehand:
// sgemm's or bf16gemm's product, by the pack's format, the same bits as theirs on the matrix it
// was packed from.
// C may be stored as bfloat16, as bf16gemm's.
void multiply(bool trans_a, int64_t M, Operand<float> A, int64_t lda, const Packed& B, bool accumulate, Output<float> C,
              int64_t ldc, const Epilogue* epilogue = nullptr);
void multiply(const Packed& A, bool trans_b, int64_t N, Operand<float> B, int64_t ldb, bool accumulate, Output<float> C,
              int64_t ldc, const Epilogue* epilogue = nullptr);

}  // namespace gmlp::gemm
