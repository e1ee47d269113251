// gmlp's own matrix products (core/gemm.h), f32 and bf16, against a double-precision product of
// the operands they multiply (bf16's rounded to bfloat16): every transposition, accumulate or not,
// strided operands, shapes that are not multiples of the tiles, odd depths and depths that cross
// the K and N blocks; and the same bits on 1 or 2 threads or inside a parallel region.
#include "core/gemm.h"
#include "core/gemm_kernel.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/cpu_features.h"
#include "core/rng.h"

namespace gmlp {
namespace {

struct Case {
  bool ta, tb, accumulate;
  int64_t M, N, K;
};

struct Operands {
  int64_t lda, ldb, ldc;
  std::vector<float> A, B, C;
};

// Operands with row strides `pad` more than needed (the padding holds NaN: it must never be read).
Operands make(const Case& c, uint64_t seed, int64_t pad = 3) {
  Rng rng(seed);
  Operands o;
  const int64_t a_rows = c.ta ? c.K : c.M, a_cols = c.ta ? c.M : c.K;
  const int64_t b_rows = c.tb ? c.N : c.K, b_cols = c.tb ? c.K : c.N;
  o.lda = a_cols + pad, o.ldb = b_cols + pad, o.ldc = c.N + pad;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  o.A.assign(size_t(a_rows * o.lda), nan), o.B.assign(size_t(b_rows * o.ldb), nan);
  o.C.assign(size_t(c.M * o.ldc), nan);
  for (int64_t i = 0; i < a_rows; ++i)
    for (int64_t j = 0; j < a_cols; ++j) o.A[i * o.lda + j] = float(rng.normal());
  for (int64_t i = 0; i < b_rows; ++i)
    for (int64_t j = 0; j < b_cols; ++j) o.B[i * o.ldb + j] = float(rng.normal());
  if (c.accumulate)
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j) o.C[i * o.ldc + j] = float(rng.normal());
  return o;
}

// bf16 is AVX512-BF16's kernel; amx AMX's, or where the CPU has no AMX its emulation (the same
// packing and blocking, the tile instruction in scalar code).
enum class Format { f32, bf16, amx };

std::string name(const ::testing::TestParamInfo<Format>& info) {
  return info.param == Format::f32 ? "f32" : info.param == Format::bf16 ? "bf16" : "amx";
}

// The product of the format, with an epilogue when given.
void product(Format f, const Case& c, const Operands& o, float* C, const gemm::Epilogue* epilogue = nullptr) {
  if (f == Format::f32)
    gemm::sgemm(c.ta, c.tb, c.M, c.N, c.K, o.A.data(), o.lda, o.B.data(), o.ldb, c.accumulate, C, o.ldc, epilogue);
  else
    gemm::bf16gemm(c.ta, c.tb, c.M, c.N, c.K, o.A.data(), o.lda, o.B.data(), o.ldb, c.accumulate, C, o.ldc, epilogue);
}

std::vector<float> run(Format f, const Case& c, const Operands& o) {
  std::vector<float> C = o.C;
  product(f, c, o, C.data());
  return C;
}

// |computed - exact| ≤ γ_(K+1) · (Σ_k |a_ik b_kj| + |c_ij|), the bound of a float sum of K + 1
// terms in any order (γ_n = n·u / (1 - n·u), u = 2^-24), plus the rounding of the inputs: none,
// the inputs are floats and the reference sums their exact products in double.
// In bf16 the exact product is of the operands rounded to bfloat16, as the product multiplies them.
void expect_close(Format f, const Case& c, const Operands& o, const std::vector<float>& C) {
  auto operand = [f](float x) { return f != Format::f32 ? double(bf16_to_float(float_to_bf16(x))) : double(x); };
  const double u = std::ldexp(1.0, -24), gamma = double(c.K + 1) * u / (1 - double(c.K + 1) * u);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      double exact = c.accumulate ? double(o.C[i * o.ldc + j]) : 0.0, magnitude = std::abs(exact);
      for (int64_t k = 0; k < c.K; ++k) {
        const double a = operand(c.ta ? o.A[k * o.lda + i] : o.A[i * o.lda + k]);
        const double b = operand(c.tb ? o.B[j * o.ldb + k] : o.B[k * o.ldb + j]);
        exact += a * b, magnitude += std::abs(a * b);
      }
      const double got = C[i * o.ldc + j];
      ASSERT_LE(std::abs(got - exact), gamma * magnitude)
          << "C[" << i << "][" << j << "] of " << c.M << "x" << c.N << "x" << c.K << " ta " << c.ta << " tb " << c.tb
          << " accumulate " << c.accumulate;
    }
  for (int64_t i = 0; i < c.M; ++i)  // the padding of C is untouched
    for (int64_t j = c.N; j < o.ldc; ++j) ASSERT_TRUE(std::isnan(C[i * o.ldc + j]));
}

std::vector<Case> cases() {
  std::vector<Case> out;
  const int64_t shapes[][3] = {{1, 1, 1},       {6, 16, 8},     {7, 17, 9},    {5, 33, 1},
                               {49, 49, 128},   {13, 100, 300}, {100, 7, 513}, {2, 40, 64},
                               {130, 3100, 20}, {12, 64, 1101}, {3, 40, 70},   {11, 33, 17}};
  for (const auto& s : shapes)
    for (int t = 0; t < 8; ++t) out.push_back({bool(t & 1), bool(t & 2), bool(t & 4), s[0], s[1], s[2]});
  return out;
}

class Gemm : public ::testing::TestWithParam<Format> {
 protected:
  void SetUp() override {
    if (GetParam() == Format::f32 && !gemm::available()) GTEST_SKIP() << "no AVX2 or AVX-512 on this CPU";
    if (GetParam() != Format::f32 && !gemm::bf16_available()) GTEST_SKIP() << "no bf16 product on this CPU";
    if (GetParam() == Format::bf16)
      gemm::set_bf16_kernel(cpu_features().avx512_bf16 ? gemm::Bf16Kernel::avx512_bf16
                                                       : gemm::Bf16Kernel::avx512_bf16_emulated);
    if (GetParam() == Format::amx)
      gemm::set_bf16_kernel(gemm::amx_available() ? gemm::Bf16Kernel::amx : gemm::Bf16Kernel::amx_emulated);
  }
  void TearDown() override { gemm::set_bf16_kernel(gemm::Bf16Kernel::automatic); }
};

TEST_P(Gemm, MatchesTheDoubleProductWithinTheFloatSumBound) {
  uint64_t seed = 1;
  for (const Case& c : cases()) {
    const Operands o = make(c, seed++);
    expect_close(GetParam(), c, o, run(GetParam(), c, o));
  }
}

TEST_P(Gemm, SameBitsOnAnyThreadCountAndInsideAParallelRegion) {
  const Format f = GetParam();
  const int threads = omp_get_max_threads();
  uint64_t seed = 100;
  for (Case c : {Case{false, false, false, 300, 200, 300}, Case{false, true, true, 520, 64, 600},
                 Case{true, false, false, 7, 3100, 300}, Case{true, true, true, 97, 130, 257}}) {
    const Operands o = make(c, seed++);
    omp_set_num_threads(1);
    const std::vector<float> one = run(f, c, o);
    omp_set_num_threads(2);
    const std::vector<float> two = run(f, c, o);
    omp_set_num_threads(threads);
    std::vector<float> nested;
#pragma omp parallel num_threads(2)
    {
#pragma omp single
      nested = run(f, c, o);
    }
    ASSERT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(float))) << c.M << "x" << c.N << "x" << c.K;
    ASSERT_EQ(0, std::memcmp(one.data(), nested.data(), one.size() * sizeof(float))) << c.M << "x" << c.N << "x" << c.K;
    expect_close(f, c, o, one);
  }
}

// The epilogue sees every element of C exactly once, after its whole sum: each call finds its
// block final (equal to the product without an epilogue) and marks it; blocks never overlap.
TEST_P(Gemm, EpilogueVisitsEachFinishedElementOnce) {
  const int threads = omp_get_max_threads();
  uint64_t seed = 200;
  for (const Case& c : cases())
    for (const int t : {1, 2}) {
      const Operands o = make(c, seed++);
      const std::vector<float> plain = run(GetParam(), c, o);
      std::vector<float> C = o.C;
      std::vector<int> seen(size_t(c.M * c.N), 0);
      std::atomic<int> early{0};      // elements passed to the epilogue before their sum was complete
      std::atomic<int> misplaced{0};  // elements the block did not place where they lie in C
      const auto visit = [&](const gemm::Block& b) {
        for (int64_t i = b.r0; i < b.r1; ++i)
          for (int64_t j = b.c0; j < b.c1; ++j) {
            if (b.row<float>(i) + (j - b.c0) != &C[i * o.ldc + j]) ++misplaced;
            if (std::memcmp(&C[i * o.ldc + j], &plain[i * o.ldc + j], sizeof(float)) != 0) ++early;
#pragma omp atomic
            ++seen[i * c.N + j];
          }
      };
      const gemm::Epilogue mark(visit);
      omp_set_num_threads(t);
      product(GetParam(), c, o, C.data(), &mark);
      omp_set_num_threads(threads);
      EXPECT_EQ(early.load(), 0) << c.M << "x" << c.N << "x" << c.K << " on " << t << " threads";
      EXPECT_EQ(misplaced.load(), 0) << c.M << "x" << c.N << "x" << c.K << " on " << t << " threads";
      for (int64_t i = 0; i < c.M * c.N; ++i)
        ASSERT_EQ(seen[i], 1) << "element " << i << " of " << c.M << "x" << c.N << "x" << c.K << " on " << t
                              << " threads";
    }
}

// An operand packed beforehand (gemm::Packed), A or B, gives the bits of the product that packs it
// on every call, on 1 and 2 threads, with the epilogue, across the K and N blocks, with several
// blocks of rows and a ragged last tile, and after the matrix itself is gone.
TEST_P(Gemm, PackedOperandGivesTheBitsOfPackingOnEveryCall) {
  const Format f = GetParam();
  const int threads = omp_get_max_threads();
  uint64_t seed = 300;
  for (const gemm::Side side : {gemm::Side::b, gemm::Side::a})
    for (Case c : {Case{false, false, false, 300, 200, 300}, Case{false, true, true, 520, 64, 600},
                   Case{true, false, false, 7, 3100, 1100}, Case{true, true, true, 97, 130, 257},
                   Case{false, true, false, 49, 512, 128}, Case{false, false, true, 1, 33, 5},
                   Case{false, false, false, 196, 192, 196}, Case{true, false, true, 50, 256, 50}}) {
      SCOPED_TRACE(testing::Message() << (side == gemm::Side::a ? "A" : "B") << " packed, " << c.M << "x" << c.N << "x"
                                      << c.K);
      const Operands o = make(c, seed++);
      const std::vector<float> want = run(f, c, o);
      const bool on_a = side == gemm::Side::a;
      auto X = std::make_unique<std::vector<float>>(on_a ? o.A : o.B);
      const gemm::Packed packed(side, f != Format::f32, on_a ? c.ta : c.tb, on_a ? c.M : c.K, on_a ? c.K : c.N,
                                X->data(), on_a ? o.lda : o.ldb);
      X.reset();  // the pack holds its own copy
      EXPECT_EQ(packed.K(), c.K);
      EXPECT_EQ(on_a ? packed.rows() : packed.cols(), on_a ? c.M : c.N);
      for (const int t : {1, 2}) {
        std::vector<float> got = o.C;
        int visited = 0;
        const auto count = [&](const gemm::Block& b) {
#pragma omp atomic
          visited += int((b.r1 - b.r0) * (b.c1 - b.c0));
        };
        const gemm::Epilogue epilogue(count);
        omp_set_num_threads(t);
        if (on_a)
          gemm::multiply(packed, c.tb, c.N, o.B.data(), o.ldb, c.accumulate, got.data(), o.ldc, &epilogue);
        else
          gemm::multiply(c.ta, c.M, o.A.data(), o.lda, packed, c.accumulate, got.data(), o.ldc, &epilogue);
        omp_set_num_threads(threads);
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float))) << " on " << t << " threads";
        EXPECT_EQ(visited, c.M * c.N);
      }
    }
}

// A row of C does not depend on the rows around it: any run of rows, multiplied on its own, gives
// the bits those rows have in the whole product. A row lands in a whole tile or in a last tile of
// a few rows, in one block or among several, its tile of A read in place or packed, by where the
// run starts and how long it is; an image's rows in a batch give the bits they give alone.
TEST_P(Gemm, RowsGiveTheBitsOfTheWholeProductWhereverTheyFall) {
  const Format f = GetParam();
  const int threads = omp_get_max_threads();
  uint64_t seed = 400;
  for (Case c : {Case{false, false, false, 300, 70, 300}, Case{false, true, true, 250, 49, 256},
                 Case{true, false, true, 230, 33, 49}, Case{false, true, false, 120, 100, 600}}) {
    const Operands o = make(c, seed++);
    const std::vector<float> whole = run(f, c, o);
    for (const auto& [r0, r1] : {std::pair<int64_t, int64_t>{0, 1},
                                 {5, 6},
                                 {0, 49},
                                 {49, 98},
                                 {13, 114},
                                 {7, 108},
                                 {1, int64_t(c.M)},
                                 {int64_t(c.M) - 2, int64_t(c.M)}})
      for (const int t : {1, 2}) {
        SCOPED_TRACE(testing::Message() << "rows [" << r0 << ", " << r1 << ") of " << c.M << "x" << c.N << "x" << c.K
                                        << " ta " << c.ta << " tb " << c.tb << " on " << t << " threads");
        const float* A = o.A.data() + (c.ta ? r0 : r0 * o.lda);  // op(A)'s row r0
        std::vector<float> C(o.C.begin() + r0 * o.ldc, o.C.begin() + r1 * o.ldc);
        omp_set_num_threads(t);
        if (f == Format::f32)
          gemm::sgemm(c.ta, c.tb, r1 - r0, c.N, c.K, A, o.lda, o.B.data(), o.ldb, c.accumulate, C.data(), o.ldc);
        else
          gemm::bf16gemm(c.ta, c.tb, r1 - r0, c.N, c.K, A, o.lda, o.B.data(), o.ldb, c.accumulate, C.data(), o.ldc);
        omp_set_num_threads(threads);
        ASSERT_EQ(0, std::memcmp(whole.data() + r0 * o.ldc, C.data(), C.size() * sizeof(float)));
      }
  }
}

// C stored as bfloat16 (gemm::Output) gets the bits of the float product, epilogue included, rounded
// by round_to_bf16: for one block of rows and several, across the N block, in parts of a block,
// for sums of one K slice and of several (made whole first), an empty sum, on 1 and 2 threads and
// inside a parallel region, with the operand packed beforehand or not (the f32 format through a
// pack only: sgemm writes floats); C's padding is untouched.
TEST_P(Gemm, StoredOutputGivesTheBitsOfRoundingTheFloats) {
  const Format f = GetParam();
  const int threads = omp_get_max_threads();
  uint64_t seed = 500;
  const auto epilogue_fn = [](const gemm::Block& b) {
    for (int64_t i = b.r0; i < b.r1; ++i) {
      float* row = b.row<float>(i);
      for (int64_t j = 0; j < b.c1 - b.c0; ++j) row[j] = row[j] * 0.75f + float(b.c0 + j) * 1e-3f;
    }
  };
  const gemm::Epilogue epilogue(epilogue_fn);
  for (Case c : {Case{false, false, false, 300, 200, 300}, Case{false, true, false, 520, 64, 600},
                 Case{true, false, false, 7, 3100, 300}, Case{true, true, false, 97, 130, 257},
                 Case{false, true, false, 49, 512, 128}, Case{false, true, false, 400, 520, 128},
                 Case{false, false, false, 5, 7, 0}, Case{true, false, false, 130, 3100, 20}})
    for (const bool packed_b : {false, true}) {
      if ((f == Format::f32 && !packed_b) || (packed_b && c.K == 0)) continue;
      SCOPED_TRACE(testing::Message() << c.M << "x" << c.N << "x" << c.K << " ta " << c.ta << " tb " << c.tb
                                      << (packed_b ? ", B packed" : ""));
      const Operands o = make(c, seed++);
      std::vector<float> floats = o.C;
      product(f, c, o, floats.data(), &epilogue);
      constexpr uint16_t kPad = 0x7fc1;  // a NaN no rounding gives
      std::vector<uint16_t> want(o.C.size(), kPad);
      for (int64_t i = 0; i < c.M; ++i) gemm::round_to_bf16(&want[i * o.ldc], &floats[i * o.ldc], c.N);
      const std::unique_ptr<gemm::Packed> pack =
          packed_b ? std::make_unique<gemm::Packed>(gemm::Side::b, f != Format::f32, c.tb, c.K, c.N, o.B.data(), o.ldb)
                   : nullptr;
      auto stored = [&] {
        std::vector<uint16_t> got(o.C.size(), kPad);
        const auto out = Output<float>::bf16(got.data());
        if (pack)
          gemm::multiply(c.ta, c.M, o.A.data(), o.lda, *pack, false, out, o.ldc, &epilogue);
        else
          gemm::bf16gemm(c.ta, c.tb, c.M, c.N, c.K, o.A.data(), o.lda, o.B.data(), o.ldb, false, out, o.ldc, &epilogue);
        return got;
      };
      for (const int t : {1, 2}) {
        omp_set_num_threads(t);
        const std::vector<uint16_t> got = stored();
        omp_set_num_threads(threads);
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(uint16_t))) << " on " << t << " threads";
      }
      std::vector<uint16_t> nested;
#pragma omp parallel num_threads(2)
      {
#pragma omp single
        nested = stored();
      }
      ASSERT_EQ(0, std::memcmp(want.data(), nested.data(), want.size() * sizeof(uint16_t))) << " inside a region";
    }
}

// A column bias (Epilogue::column_bias) adds bias[j] to each finished C[i][j]: on float C as a pass
// over each block, and where C is stored as bfloat16 in the pass that rounds the block there. Both
// give the bits of the plain product with the bias added afterwards (and then rounded), on 1 and 2
// threads, in one block of rows and several, across the N block, with B packed beforehand or not.
TEST_P(Gemm, ColumnBiasGivesTheBitsOfAddingItAfterTheProduct) {
  const Format f = GetParam();
  const int threads = omp_get_max_threads();
  uint64_t seed = 600;
  for (Case c : {Case{false, true, false, 49, 512, 128}, Case{false, true, false, 400, 520, 128},
                 Case{false, false, false, 300, 200, 300}, Case{true, false, false, 130, 3100, 20},
                 Case{false, true, false, 7, 45, 64}})
    for (const bool packed_b : {false, true}) {
      SCOPED_TRACE(testing::Message() << c.M << "x" << c.N << "x" << c.K << " ta " << c.ta << " tb " << c.tb
                                      << (packed_b ? ", B packed" : ""));
      const Operands o = make(c, seed++);
      std::vector<float> bias(size_t(c.N));
      Rng rng(seed++);
      for (float& v : bias) v = float(rng.normal());
      std::vector<float> want = run(f, c, o);
      for (int64_t i = 0; i < c.M; ++i)
        for (int64_t j = 0; j < c.N; ++j) want[i * o.ldc + j] += bias[j];
      constexpr uint16_t kPad = 0x7fc1;  // a NaN no rounding gives
      std::vector<uint16_t> want16(o.C.size(), kPad);
      for (int64_t i = 0; i < c.M; ++i) gemm::round_to_bf16(&want16[i * o.ldc], &want[i * o.ldc], c.N);
      const gemm::Epilogue epilogue = gemm::Epilogue::column_bias(bias.data());
      ASSERT_EQ(epilogue.bias(), bias.data());
      const std::unique_ptr<gemm::Packed> pack =
          packed_b ? std::make_unique<gemm::Packed>(gemm::Side::b, f != Format::f32, c.tb, c.K, c.N, o.B.data(), o.ldb)
                   : nullptr;
      for (const int t : {1, 2}) {
        omp_set_num_threads(t);
        std::vector<float> got = o.C;
        if (pack)
          gemm::multiply(c.ta, c.M, o.A.data(), o.lda, *pack, false, got.data(), o.ldc, &epilogue);
        else
          product(f, c, o, got.data(), &epilogue);
        std::vector<uint16_t> got16(o.C.size(), kPad);
        const auto out = Output<float>::bf16(got16.data());
        if (pack)
          gemm::multiply(c.ta, c.M, o.A.data(), o.lda, *pack, false, out, o.ldc, &epilogue);
        else if (f != Format::f32)
          gemm::bf16gemm(c.ta, c.tb, c.M, c.N, c.K, o.A.data(), o.lda, o.B.data(), o.ldb, false, out, o.ldc, &epilogue);
        omp_set_num_threads(threads);
        for (int64_t i = 0; i < c.M; ++i)
          ASSERT_EQ(0, std::memcmp(&want[i * o.ldc], &got[i * o.ldc], size_t(c.N) * sizeof(float)))
              << "float C, row " << i << " on " << t << " threads";
        if (pack || f != Format::f32) {
          ASSERT_EQ(0, std::memcmp(want16.data(), got16.data(), want16.size() * sizeof(uint16_t)))
              << "bf16 C on " << t << " threads";
        }
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Formats, Gemm, ::testing::Values(Format::f32, Format::bf16, Format::amx), name);

// Each fp32 tile the CPU can run (AVX2's 6 × 16, and AVX-512's 12 × 32 where it has AVX-512) gives
// every element of C the bits of its chain of fused multiply-adds over k in order, from packed A,
// from A read in place and on its first rows only; and its A packing (pack_a_rows_avx2, for either
// tile's rows) puts each element where the tile reads it. The product picks one of the two by
// the CPU, so the other is held to the same rule here.
TEST(F32Tiles, EveryElementGetsItsFusedMultiplyAddChainInOrder) {
  struct Tiles {
    int mr, nr;
    gemm::Kernel whole;
    gemm::DirectKernel direct;
    gemm::EdgeKernel edge;
  };
  std::vector<Tiles> tiles;
  if (cpu_features().avx2)
    tiles.push_back({gemm::kMRAvx2, gemm::kNRAvx2, gemm::tile_avx2, gemm::tile_direct_avx2, gemm::tile_rows_avx2});
  if (cpu_features().avx512f)
    tiles.push_back(
        {gemm::kMRAvx512, gemm::kNRAvx512, gemm::tile_avx512, gemm::tile_direct_avx512, gemm::tile_rows_avx512});
  if (tiles.empty()) GTEST_SKIP() << "no AVX2";
  Rng rng(11);
  for (const Tiles& t : tiles)
    for (int64_t kc : {1, 5, 8, 17, 40})
      for (int rows = 1; rows <= t.mr; ++rows)
        for (bool accumulate : {false, true}) {
          const int64_t lda = kc + 3, ldc = t.nr + 5;
          std::vector<float> a(size_t(t.mr * lda)), b(size_t(kc * t.nr)), c0(size_t(t.mr * ldc));
          for (float& x : a) x = float(rng.normal());
          for (float& x : b) x = float(rng.normal());
          for (float& x : c0) x = float(rng.normal());
          std::vector<float> packed(size_t(kc * t.mr), -1.f);
          gemm::pack_a_rows_avx2(packed.data(), a.data(), lda, kc, rows, t.mr);
          for (int64_t k = 0; k < kc; ++k)
            for (int i = 0; i < t.mr; ++i)
              ASSERT_EQ(packed[size_t(k * t.mr + i)], i < rows ? a[size_t(i * lda + k)] : 0.f)
                  << "mr " << t.mr << " rows " << rows << " k " << k << " i " << i;
          const bool whole = rows == t.mr;
          if (!whole && accumulate) continue;  // the first rows only are written, never summed onto
          std::vector<float> c = c0, direct = c0;
          if (whole) {
            t.whole(kc, packed.data(), b.data(), c.data(), ldc, accumulate);
            t.direct(kc, a.data(), lda, b.data(), direct.data(), ldc, accumulate);
          } else {
            t.edge(rows, kc, packed.data(), b.data(), c.data(), ldc);
          }
          for (int i = 0; i < t.mr; ++i)
            for (int j = 0; j < ldc; ++j) {
              const size_t at = size_t(i * ldc + j);
              if (i >= rows || j >= t.nr) {  // outside the tile's rows and columns: untouched
                ASSERT_EQ(std::bit_cast<uint32_t>(c[at]), std::bit_cast<uint32_t>(c0[at]));
                continue;
              }
              float sum = 0.f;
              for (int64_t k = 0; k < kc; ++k) sum = std::fma(a[size_t(i * lda + k)], b[size_t(k * t.nr + j)], sum);
              if (accumulate) sum += c0[at];
              ASSERT_EQ(std::bit_cast<uint32_t>(c[at]), std::bit_cast<uint32_t>(sum))
                  << "mr " << t.mr << " rows " << rows << " kc " << kc << " (" << i << ", " << j << ")";
              if (whole) {
                ASSERT_EQ(std::bit_cast<uint32_t>(direct[at]), std::bit_cast<uint32_t>(sum));
              }
            }
        }
}

// round_to_bf16 rounds as vcvtne2ps2bf16 does (float_to_bf16_daz): to nearest, ties to even, on
// normal numbers, infinities and the halfway cases, denormals to zeros of their sign; at every
// length (the masked tail), with a scale and a sum, and with a bias added first. Where the CPU has AVX512-BF16 this
// holds the instruction to the rule the portable rounding follows, and elsewhere the portable rounding.
TEST(Bf16Storage, RoundToBf16RoundsAsTheInstruction) {
  Rng rng(7);
  std::vector<float> x;
  x.reserve(500);
  for (int i = 0; i < 500; ++i) x.push_back(float(rng.normal() * std::ldexp(1.0, int(i % 40) - 20)));
  for (uint32_t bits : {0x3f808000u, 0x3f818000u, 0xbf808000u, 0x3f80ffffu, 0x7f7fffffu, 0x7f800000u, 0xff800000u,
                        0x00000001u, 0x80400000u, 0x007fffffu, 0x00800000u, 0x80800000u})
    x.push_back(std::bit_cast<float>(bits));  // ties, the largest float (rounds to inf), infinities, denormals
  x.push_back(0.f), x.push_back(-0.f);
  for (const size_t n : {x.size(), size_t(1), size_t(17), size_t(31), size_t(32), size_t(33)}) {
    std::vector<uint16_t> got(n + 1, 0xabcd);
    gemm::round_to_bf16(got.data(), x.data(), int64_t(n));
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], float_to_bf16_daz(x[i])) << "element " << i << " of " << n;
    EXPECT_EQ(got[n], 0xabcd) << "wrote past n = " << n;
  }
  EXPECT_EQ(float_to_bf16_daz(std::bit_cast<float>(0x80400000u)), 0x8000);
  // Scaled (by floats or by bfloat16) and summed: x·scale rounded, and added to the sum in fp32.
  const size_t n = 77;
  std::vector<float> scale(n), sum(n), sum_ref(n);
  std::vector<uint16_t> scale16(n), got(n);
  for (size_t i = 0; i < n; ++i) scale[i] = float(rng.normal()), scale16[i] = float_to_bf16(scale[i]);
  for (const bool bf16_scale : {false, true}) {
    for (size_t i = 0; i < n; ++i) sum[i] = sum_ref[i] = float(i);
    if (bf16_scale)
      gemm::round_to_bf16(got.data(), x.data(), int64_t(n), scale16.data(), sum.data());
    else
      gemm::round_to_bf16(got.data(), x.data(), int64_t(n), scale.data(), sum.data());
    for (size_t i = 0; i < n; ++i) {
      const float y = x[i] * (bf16_scale ? bf16_to_float(scale16[i]) : scale[i]);
      ASSERT_EQ(got[i], float_to_bf16_daz(y)) << "scaled element " << i;
      ASSERT_EQ(sum[i], sum_ref[i] + y) << "summed element " << i;
    }
  }
  // With a bias (round_to_bf16_adding): x + bias rounded, the instruction's and the portable code's.
  for (const size_t m : {n, size_t(5), size_t(32)}) {
    std::vector<uint16_t> native(m + 1, 0xabcd), portable(m + 1, 0xabcd);
    gemm::round_to_bf16_adding(native.data(), x.data(), scale.data(), int64_t(m));
    gemm::portable::round_to_bf16_adding(portable.data(), x.data(), scale.data(), int64_t(m));
    for (size_t i = 0; i < m; ++i) {
      ASSERT_EQ(native[i], float_to_bf16_daz(x[i] + scale[i])) << "biased element " << i << " of " << m;
      ASSERT_EQ(portable[i], native[i]) << "biased element " << i << " of " << m;
    }
    EXPECT_EQ(native[m], 0xabcd) << "wrote past m = " << m;
  }
}

// The emulated kernel's portable packing gives the words AVX512-BF16's packing gives, for floats
// and for bfloat16, along either contiguous side, at ragged rows, columns and depths: so that a
// CPU without AVX512-BF16 tests the products the others run.
TEST(Bf16Storage, PortablePackingGivesTheWordsOfTheInstructions) {
  if (!cpu_features().avx512_bf16) GTEST_SKIP() << "no AVX512-BF16 on this CPU to compare with";
  Rng rng(8);
  for (const auto& shape : {std::pair<int64_t, int64_t>{32, 32}, {7, 33}, {45, 1}, {64, 100}, {3, 512}}) {
    const int64_t rows = shape.first, kc = shape.second;  // named: the lambdas below capture them
    const int64_t ld = std::max(rows, kc) + 3;
    std::vector<float> m(size_t(ld * ld));
    for (float& v : m) v = float(rng.normal());
    std::vector<uint16_t> m16(m.size());
    gemm::round_to_bf16(m16.data(), m.data(), int64_t(m.size()));
    const int64_t words = ((kc + 1) / 2 + gemm::kAmxPairs - 1) / gemm::kAmxPairs * gemm::kAmxPairs;
    const size_t a_size = size_t((rows + gemm::kMRAmx - 1) / gemm::kMRAmx * gemm::kMRAmx * words);
    const size_t b_size = size_t((kc + 1) / 2 * gemm::kNRBf16);
    const size_t panels_size = size_t((rows + gemm::kMRBf16 - 1) / gemm::kMRBf16 * gemm::kMRBf16 * ((kc + 1) / 2));
    for (const bool trans : {false, true}) {
      SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(kc) + (trans ? " transposed" : ""));
      const int64_t rs = trans ? 1 : ld, cs = trans ? ld : 1;
      // The words of the instructions' packer and of the portable one, from floats and from bfloat16.
      auto same = [&](const char* what, size_t size, auto&& native_pack, auto&& portable_pack) {
        for (const bool stored : {false, true}) {
          std::vector<uint32_t> native(size, 1), portable(size, 2);  // unlike: a word left unwritten shows
          if (stored)
            native_pack(native.data(), m16.data()), portable_pack(portable.data(), m16.data());
          else
            native_pack(native.data(), m.data()), portable_pack(portable.data(), m.data());
          EXPECT_EQ(native, portable) << what << (stored ? " from bfloat16" : " from floats");
        }
      };
      const int64_t cols = std::min<int64_t>(rows, gemm::kNRBf16);  // op(B) is kc × cols
      same(
          "AMX's A", a_size, [&](uint32_t* d, const auto* x) { gemm::pack_a_amx(d, x, rs, cs, rows, kc); },
          [&](uint32_t* d, const auto* x) { gemm::portable::pack_a_amx(d, x, rs, cs, rows, kc); });
      same(
          "AVX512-BF16's A", panels_size,
          [&](uint32_t* d, const auto* x) { gemm::pack_a_bf16(d, x, rs, cs, rows, kc); },
          [&](uint32_t* d, const auto* x) { gemm::portable::pack_a_bf16(d, x, rs, cs, rows, kc); });
      same(
          "B", b_size, [&](uint32_t* d, const auto* x) { gemm::pack_b_bf16(d, x, cs, rs, kc, cols); },
          [&](uint32_t* d, const auto* x) { gemm::portable::pack_b_bf16(d, x, cs, rs, kc, cols); });
    }
  }
}

// The check of Bf16Storage.StoredOperandsGiveTheBitsOfRoundingWhilePacking, on the kernel in use.
void expect_stored_operands_give_the_bits_of_floats() {
  uint64_t seed = 500;
  std::vector<std::pair<Case, int64_t>> all;  // with the padding of the rows
  for (const Case& c : cases()) all.push_back({c, 3});
  for (const Case& c : {Case{false, true, false, 200, 64, 512}, Case{false, false, true, 300, 40, 256},
                        Case{false, true, true, 130, 3100, 20}, Case{false, false, false, 205, 70, 1100}})
    for (const int64_t pad : {2, 3}) all.push_back({c, pad});
  for (const auto& [c, pad] : all) {
    auto store = [pad = pad](const std::vector<float>& m, int64_t ld) {
      std::vector<uint16_t> out(m.size());
      for (size_t r = 0; r < m.size(); r += size_t(ld)) {
        gemm::round_to_bf16(out.data() + r, m.data() + r, ld - pad);
        for (size_t j = size_t(ld - pad); j < size_t(ld); ++j) out[r + j] = 0x7fc0;  // NaN padding, never read
      }
      return out;
    };
    const Operands o = make(c, seed++, pad);
    const std::vector<float> want = run(Format::bf16, c, o);
    const std::vector<uint16_t> A = store(o.A, o.lda), B = store(o.B, o.ldb);
    for (int which = 1; which <= 3; ++which) {
      const Operand<float> a = which & 1 ? Operand<float>::bf16(A.data()) : Operand<float>(o.A.data());
      const Operand<float> b = which & 2 ? Operand<float>::bf16(B.data()) : Operand<float>(o.B.data());
      std::vector<float> got = o.C;
      gemm::bf16gemm(c.ta, c.tb, c.M, c.N, c.K, a, o.lda, b, o.ldb, c.accumulate, got.data(), o.ldc);
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
          << c.M << "x" << c.N << "x" << c.K << " ta " << c.ta << " tb " << c.tb << (which & 1 ? " A" : "")
          << (which & 2 ? " B" : "") << " stored as bf16";
      if (c.accumulate) continue;
      // C stored as bfloat16 as well: the floats' bits, rounded.
      constexpr uint16_t kPad = 0x7fc1;  // a NaN no rounding gives
      std::vector<uint16_t> want16(o.C.size(), kPad), got16(o.C.size(), kPad);
      for (int64_t i = 0; i < c.M; ++i) gemm::round_to_bf16(&want16[i * o.ldc], &want[i * o.ldc], c.N);
      gemm::bf16gemm(c.ta, c.tb, c.M, c.N, c.K, a, o.lda, b, o.ldb, false, Output<float>::bf16(got16.data()), o.ldc);
      ASSERT_EQ(0, std::memcmp(want16.data(), got16.data(), want16.size() * sizeof(uint16_t)))
          << c.M << "x" << c.N << "x" << c.K << " ta " << c.ta << " tb " << c.tb << (which & 1 ? " A" : "")
          << (which & 2 ? " B" : "") << " and C stored as bf16";
    }
  }
}

// An operand stored as bfloat16 (round_to_bf16, as an op stores an activation) gives the bits of
// bf16gemm on the floats it was rounded from, for A, B or both, in every transposition, across
// the blocks and at the edges (odd depths, partial panels), packed or (rows of A, even strides
// and depths, more rows than a block) read in place, and with C stored as bfloat16 too, those
// bits rounded; the stored operands' padding is NaN. On AVX512-BF16's kernel and on AMX's, each
// emulated where the CPU has not got it.
TEST(Bf16Storage, StoredOperandsGiveTheBitsOfRoundingWhilePacking) {
  if (!gemm::bf16_available()) GTEST_SKIP() << "no bf16 product on this CPU";
  for (const gemm::Bf16Kernel kernel :
       {cpu_features().avx512_bf16 ? gemm::Bf16Kernel::avx512_bf16 : gemm::Bf16Kernel::avx512_bf16_emulated,
        gemm::amx_available() ? gemm::Bf16Kernel::amx : gemm::Bf16Kernel::amx_emulated}) {
    gemm::set_bf16_kernel(kernel);
    SCOPED_TRACE(gemm::bf16_kernel_name());
    expect_stored_operands_give_the_bits_of_floats();
  }
  gemm::set_bf16_kernel(gemm::Bf16Kernel::automatic);
}

}  // namespace
}  // namespace gmlp
