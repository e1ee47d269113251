// The matmul seam: every transposition and the accumulate flag against a plain double product,
// in f32 and in bf16. bf16 is checked exactly where it can be: the product of the bf16-rounded
// operands, computed in double, must match to fp32 summation accuracy.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "check.h"
#include "core/bf16.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/gemm.h"
#include "core/matmul.h"
#include "core/threads.h"
#include "tolerances.h"

namespace gmlp {
namespace {

using test::close;

struct Case {
  bool ta, tb, accumulate;
};

void check_matmul(Case c, Precision precision, int64_t M, int64_t N, int64_t K) {
  const int64_t lda = (c.ta ? M : K) + 3, ldb = (c.tb ? K : N) + 5, ldc = N + 7;
  Rng rng(41);
  auto A = test::randn<float>((c.ta ? K : M) * lda, rng), B = test::randn<float>((c.tb ? N : K) * ldb, rng);
  auto C = test::randn<float>(M * ldc, rng);
  auto round = [&](float x) { return precision == Precision::bf16 ? bf16_to_float(float_to_bf16(x)) : x; };
  std::vector<double> expect(M * ldc);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      double acc = c.accumulate ? C[i * ldc + j] : 0.0;
      if (j < N)
        for (int64_t k = 0; k < K; ++k)
          acc += double(round(c.ta ? A[k * lda + i] : A[i * lda + k])) *
                 double(round(c.tb ? B[j * ldb + k] : B[k * ldb + j]));
      else
        acc = C[i * ldc + j];  // padding is never written
      expect[i * ldc + j] = acc;
    }
  set_matmul_precision(precision);
  matmul<float>(c.ta, c.tb, M, N, K, A.data(), lda, B.data(), ldb, c.accumulate ? 1.f : 0.f, C.data(), ldc);
  set_matmul_precision(Precision::f32);
  // Sums of K products of O(1) values have magnitude ~√K; fp32 accumulation error stays well
  // below 1e-5 of that.
  EXPECT_TRUE(close("C", C.data(), expect.data(), M * ldc, tol::kFastVsRef, std::sqrt(double(K))));
}

class Matmul : public ::testing::TestWithParam<std::tuple<Case, Precision>> {};

TEST_P(Matmul, MatchesDoubleProductOfTheRoundedOperands) {
  const auto [c, precision] = GetParam();
  if (precision == Precision::bf16 && !gemm::bf16_available()) GTEST_SKIP() << "no bf16 product on this CPU";
  // Ragged sizes and padded leading dimensions, so strides are exercised; one shape above the
  // 2^22 multiply-adds below which f32 runs single-threaded.
  // The third (long K, small output) takes the split-K path in A·Bᵀ when two threads run.
  for (const auto& [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{37, 53, 71}, {263, 257, 300}, {49, 53, 2600}}) {
    SCOPED_TRACE(M);
    check_matmul(c, precision, M, N, K);
  }
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, Matmul,
                         ::testing::Combine(::testing::Values(Case{false, false, false}, Case{false, true, false},
                                                              Case{false, true, true}, Case{true, false, true},
                                                              Case{true, true, true}, Case{false, false, true}),
                                            ::testing::Values(Precision::f32, Precision::bf16)));

// Both bf16 engines, wherever the CPU runs them: gmlp's own (AVX512-BF16) and oneDNN's matmul
// primitive (on AMX its tile kernels, elsewhere its AVX512-BF16 ones), each against the double
// product of the rounded operands, in every layout.
TEST(Matmul, EachBf16EngineMatchesTheDoubleProductOfTheRoundedOperands) {
  std::vector<Bf16Engine> engines;
  if (cpu_has_bf16()) engines.push_back(Bf16Engine::onednn);  // oneDNN's needs the CPU's bf16
  if (gemm::bf16_available()) engines.push_back(Bf16Engine::gmlp);
  if (engines.empty()) GTEST_SKIP() << "no bf16 product on this CPU";
  for (const Bf16Engine engine : engines) {
    set_bf16_engine(engine);
    SCOPED_TRACE(bf16_engine_name());
    for (const Case c :
         {Case{false, false, false}, Case{false, true, true}, Case{true, false, true}, Case{true, true, false}})
      for (const auto& [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{37, 53, 71}, {263, 257, 300}})
        check_matmul(c, Precision::bf16, M, N, K);
  }
  set_bf16_engine(Bf16Engine::automatic);
}

// C stored as bf16 gets the bits of the float C with its epilogue, rounded by round_to_bf16, on
// every path: gmlp's own bf16 product (rounding block by block), and the products that write only
// floats (f32, oneDNN's bf16 primitive), whose C matmul rounds afterwards; on two threads.
TEST(Matmul, StoredOutputGivesTheBitsOfRoundingTheFloatsOnEveryPath) {
  const test::WithThreads two(2);
  struct Path {
    Precision precision;
    Bf16Engine engine;
  };
  std::vector<Path> paths{{Precision::f32, Bf16Engine::automatic}};
  if (cpu_has_bf16()) paths.push_back({Precision::bf16, Bf16Engine::onednn});
  if (gemm::bf16_available()) paths.push_back({Precision::bf16, Bf16Engine::gmlp});
  const auto epilogue_fn = [](const gemm::Block& b) {
    for (int64_t i = b.r0; i < b.r1; ++i) {
      float* row = b.row<float>(i);
      for (int64_t j = 0; j < b.c1 - b.c0; ++j) row[j] = row[j] * 0.75f - 0.5f;
    }
  };
  const gemm::Epilogue epilogue(epilogue_fn);
  for (const Path& p : paths)
    for (const auto& [ta, tb, M, N, K] : {std::tuple{false, true, 263, 257, 300}, std::tuple{true, false, 49, 53, 2600},
                                          std::tuple{false, false, 7, 600, 0}}) {
      SCOPED_TRACE(std::string(precision_name(p.precision)) + (p.engine == Bf16Engine::onednn ? " onednn" : "") + " " +
                   std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K));
      set_matmul_precision(p.precision);
      set_bf16_engine(p.engine);
      Rng rng(44);
      const int64_t lda = ta ? M : K, ldb = tb ? K : N, ldc = N + 5;
      auto A = test::randn<float>(std::max(1, M * K), rng), B = test::randn<float>(std::max(1, K * N), rng);
      std::vector<float> floats(M * ldc, 0.f);
      matmul<float>(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, 0.f, floats.data(), ldc, &epilogue);
      std::vector<uint16_t> want(M * ldc, 0x7fc1), got(M * ldc, 0x7fc1);  // padding: a NaN no rounding gives
      for (int64_t i = 0; i < M; ++i) gemm::round_to_bf16(&want[i * ldc], &floats[i * ldc], N);
      matmul<float>(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, 0.f, Output<float>::bf16(got.data()), ldc,
                    &epilogue);
      set_matmul_precision(Precision::f32);
      set_bf16_engine(Bf16Engine::automatic);
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(uint16_t)));
    }
}

// Every path of matmul hands each element of C to the epilogue exactly once, after its sum is
// complete, on two threads: gmlp's own products (block by block), and oneDNN's bf16 primitive and
// the split-K sum (the whole of C afterwards, in blocks of rows shared by the threads).
TEST(Matmul, EpilogueSeesEachFinishedElementOnceOnEveryPath) {
  const test::WithThreads two(2);
  struct Path {
    Precision precision;
    Bf16Engine engine;
    bool ta, tb;
    int64_t M, N, K;
  };
  std::vector<Path> paths{{Precision::f32, Bf16Engine::automatic, false, true, 263, 257, 300},
                          {Precision::f32, Bf16Engine::automatic, true, false, 49, 53, 2600}};  // split K
  if (cpu_has_bf16()) {
    paths.push_back({Precision::bf16, Bf16Engine::onednn, false, true, 263, 257, 300});
    paths.push_back({Precision::bf16, Bf16Engine::onednn, true, false, 49, 53, 2600});  // split K
  }
  if (gemm::bf16_available()) paths.push_back({Precision::bf16, Bf16Engine::gmlp, false, true, 263, 257, 300});
  for (const Path& p : paths) {
    SCOPED_TRACE(std::string(precision_name(p.precision)) + (p.ta ? " A transposed" : "") +
                 " M=" + std::to_string(p.M));
    set_matmul_precision(p.precision);
    set_bf16_engine(p.engine);
    Rng rng(43);
    const int64_t lda = p.ta ? p.M : p.K, ldb = p.tb ? p.K : p.N;
    auto A = test::randn<float>(p.M * p.K, rng), B = test::randn<float>(p.K * p.N, rng);
    std::vector<float> plain(p.M * p.N), C(p.M * p.N);
    matmul<float>(p.ta, p.tb, p.M, p.N, p.K, A.data(), lda, B.data(), ldb, 0.f, plain.data(), p.N);
    std::vector<int> seen(size_t(p.M * p.N), 0);
    std::atomic<int> early{0};
    std::atomic<int> misplaced{0};  // elements the block did not place where they lie in C
    const auto visit = [&](const gemm::Block& b) {
      for (int64_t i = b.r0; i < b.r1; ++i)
        for (int64_t j = b.c0; j < b.c1; ++j) {
          if (b.row<float>(i) + (j - b.c0) != &C[i * p.N + j]) ++misplaced;
          if (std::memcmp(&C[i * p.N + j], &plain[i * p.N + j], sizeof(float)) != 0) ++early;
#pragma omp atomic
          ++seen[i * p.N + j];
        }
    };
    const gemm::Epilogue mark(visit);
    matmul<float>(p.ta, p.tb, p.M, p.N, p.K, A.data(), lda, B.data(), ldb, 0.f, C.data(), p.N, &mark);
    set_matmul_precision(Precision::f32);
    set_bf16_engine(Bf16Engine::automatic);
    EXPECT_EQ(early.load(), 0);
    EXPECT_EQ(misplaced.load(), 0);
    for (int64_t i = 0; i < p.M * p.N; ++i) ASSERT_EQ(seen[i], 1) << "element " << i;
  }
}

// --bf16-engine: a name it does not know is a one-line error naming what it expected; gmlp's own
// engine is refused on a CPU without AVX512-BF16.
TEST(Matmul, Bf16EngineNames) {
  EXPECT_EQ(use_bf16_engine("onednn"), Bf16Engine::onednn);
  EXPECT_STREQ(bf16_engine_name(), "onednn");
  EXPECT_EQ(use_bf16_engine("auto"), Bf16Engine::automatic);
  EXPECT_STREQ(bf16_engine_name(), gemm::bf16_available() ? "gmlp" : "onednn");
  try {
    use_bf16_engine("amx");
    FAIL() << "amx was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown bf16 engine 'amx': expected auto, gmlp or onednn");
  }
  if (!cpu_features().avx512_bf16) {  // with the tests' emulation off, as in the binary
    gemm::set_bf16_emulated(false);
    EXPECT_THROW(use_bf16_engine("gmlp"), Error);
    gemm::set_bf16_emulated(true);
  }
  EXPECT_EQ(bf16_engine(), Bf16Engine::automatic);
}

// A B held constant is packed on its first product and the pack reused (the same bits as
// packing every call), in each precision the CPU runs natively, and so is an A; a B outside the
// range is not packed; releasing the range drops its packs.
TEST(Matmul, ConstantOperandsArePackedOnceAndGiveTheSameBits) {
  if (!gemm::available()) GTEST_SKIP() << "no AVX2 or AVX-512 on this CPU";
  Rng rng(43);
  const int64_t M = 70, N = 96, K = 130;
  auto W = test::randn<float>(N * K + 16, rng), x = test::randn<float>(M * K, rng),
       other = test::randn<float>(N * K, rng);
  // f32, and bf16 on each engine the CPU runs (gmlp's own packs, oneDNN's keeps a rounded copy).
  std::vector<std::pair<Precision, Bf16Engine>> runs{{Precision::f32, Bf16Engine::automatic}};
  if (gemm::bf16_available()) runs.emplace_back(Precision::bf16, Bf16Engine::gmlp);
  if (cpu_has_bf16()) runs.emplace_back(Precision::bf16, Bf16Engine::onednn);
  for (const auto& [precision, engine] : runs) {
    set_bf16_engine(engine);
    SCOPED_TRACE(cat(precision_name(precision), " ", bf16_engine_name()));
    set_matmul_precision(precision);
    std::vector<float> want(M * N), got(M * N), got_other(M * N), want_other(M * N);
    matmul<float>(false, true, M, N, K, x.data(), K, W.data() + 16, K, 0.f, want.data(), N);  // y = x·Wᵀ
    matmul<float>(false, true, M, N, K, x.data(), K, other.data(), K, 0.f, want_other.data(), N);
    const size_t before = constant_pack_bytes();
    hold_constant(W.data(), W.data() + W.size());
    for (int call = 0; call < 2; ++call) {
      matmul<float>(false, true, M, N, K, x.data(), K, W.data() + 16, K, 0.f, got.data(), N);
      EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float))) << "call " << call;
    }
    EXPECT_GT(constant_pack_bytes(), before) << "the product kept a pack of the constant";
    const size_t one = constant_pack_bytes();
    matmul<float>(false, true, M, N, K, x.data(), K, other.data(), K, 0.f, got_other.data(), N);
    EXPECT_EQ(constant_pack_bytes(), one) << "a B outside the range is not packed";
    EXPECT_EQ(0, std::memcmp(want_other.data(), got_other.data(), want_other.size() * sizeof(float)));
    // A constant A (W·xᵀ: the gate's token-mixing weight's place) is kept too, packed as an A by
    // gmlp's products, as the same dense copy by oneDNN's primitive; in place, and transposed.
    for (const bool trans_a : {false, true}) {
      SCOPED_TRACE(trans_a ? "Wᵀ as A" : "W as A");
      const int64_t rows = trans_a ? K : N, depth = trans_a ? N : K;  // op(A): rows × depth; W's stride K
      const float* y = trans_a ? other.data() : x.data();             // M × depth, read transposed
      std::vector<float> want_a(rows * M), got_a(rows * M);
      release_constant(W.data());
      matmul<float>(trans_a, true, rows, M, depth, W.data() + 16, K, y, depth, 0.f, want_a.data(), M);
      hold_constant(W.data(), W.data() + W.size());
      for (int call = 0; call < 2; ++call) {
        matmul<float>(trans_a, true, rows, M, depth, W.data() + 16, K, y, depth, 0.f, got_a.data(), M);
        EXPECT_EQ(0, std::memcmp(want_a.data(), got_a.data(), want_a.size() * sizeof(float))) << "call " << call;
      }
      EXPECT_GT(constant_pack_bytes(), before) << "the product kept the constant A";
    }
    release_constant(W.data());
    EXPECT_EQ(constant_pack_bytes(), before);
  }
  set_matmul_precision(Precision::f32);
  set_bf16_engine(Bf16Engine::automatic);
}

// No team is larger than the runtime's thread limit (OMP_THREAD_LIMIT; the ctest split_k_small_team
// sets it to 1): set_threads asks for at most that many, so that the count a product sizes its
// work for (oneDNN's, omp_get_max_threads) is the team it gets. Asked for two under a limit of
// one, oneDNN 2.6.3's AMX matmul left half of C unwritten.
TEST(Matmul, ThreadCountIsCappedAtTheRuntimesLimit) {
  const int saved = num_threads();
  set_threads(2);
  EXPECT_EQ(num_threads(), std::min(2, omp_get_thread_limit()));
  int team = 0;
#pragma omp parallel
  {
#pragma omp single
    team = omp_get_num_threads();
  }
  EXPECT_EQ(team, num_threads());
  set_threads(saved);
}

TEST(Matmul, SplitKOnTwoThreadsMatchesTheDoubleProduct) {
  // The split-K path's edges. A·Bᵀ: fewer chunks than threads would allow, a ragged last chunk,
  // and the spatial-gradient shapes (49 and 196 tokens). Aᵀ·B: a linear layer's weight gradients
  // (fmnist-s's fc2 and fc1 at batch 64) and an odd sum, in f32 and bf16. Each with and without
  // accumulation.
  const int saved = num_threads();
  set_threads(2);
  for (const auto& [M, N, K] :
       {std::tuple<int64_t, int64_t, int64_t>{49, 49, 1024}, {49, 49, 5000}, {196, 196, 3072}, {5, 7, 1537}})
    for (const bool accumulate : {false, true}) {
      SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(K) + (accumulate ? " +=" : ""));
      check_matmul(Case{false, true, accumulate}, Precision::f32, M, N, K);
    }
  // bf16 with each engine: oneDNN's primitive runs each thread's part on that thread alone.
  for (const Precision precision : {Precision::f32, Precision::bf16})
    for (const Bf16Engine engine : {Bf16Engine::gmlp, Bf16Engine::onednn}) {
      if (precision == Precision::bf16 && engine == Bf16Engine::onednn && !cpu_has_bf16()) continue;
      if (precision == Precision::f32 && engine == Bf16Engine::onednn) continue;
      if (engine == Bf16Engine::gmlp && precision == Precision::bf16 && !gemm::bf16_available()) continue;
      set_bf16_engine(precision == Precision::bf16 ? engine : Bf16Engine::automatic);
      for (const auto& [M, N, K] :
           {std::tuple<int64_t, int64_t, int64_t>{128, 256, 3136}, {512, 128, 3136}, {5, 7, 33}})
        for (const bool accumulate : {false, true}) {
          SCOPED_TRACE(
              cat(precision_name(precision), " ", bf16_engine_name(), " ", M, "x", N, "x", K, accumulate ? " +=" : ""));
          check_matmul(Case{true, false, accumulate}, precision, M, N, K);
        }
    }
  set_bf16_engine(Bf16Engine::automatic);
  set_threads(saved);
}

TEST(Matmul, SplitKWeightGradientsOfStoredBf16GiveTheBitsOfFloats) {
  // The weight gradients whose long sum the threads split, with one or both operands stored as
  // bf16 (as a layer stores them): a linear layer's dW = dyᵀ·x (each thread's rows, in place) and
  // a token layer's dW = dy·xᵀ (chunks of columns, copied as stored) give the bits of the floats
  // the operands were rounded from.
  if (!gemm::bf16_available()) GTEST_SKIP() << "no bf16 product on this CPU";
  const int saved = num_threads();
  set_threads(2);
  set_bf16_engine(Bf16Engine::gmlp);
  set_matmul_precision(Precision::bf16);
  struct Shape {
    bool ta;
    int64_t M, N, K;
  };
  for (const Shape& sh : {Shape{true, 128, 256, 3136}, Shape{false, 64, 49, 8192}})
    for (const bool a_stored : {false, true}) {
      SCOPED_TRACE(
          cat(sh.ta ? "Aᵀ·B " : "A·Bᵀ ", sh.M, "x", sh.N, "x", sh.K, a_stored ? ", both stored" : ", B stored"));
      const bool tb = !sh.ta;
      const int64_t M = sh.M, N = sh.N, K = sh.K, lda = sh.ta ? M : K, ldb = tb ? K : N;
      Rng rng(43);
      const auto A = test::randn<float>(K * M, rng), B = test::randn<float>(K * N, rng);
      std::vector<uint16_t> A16(A.size()), B16(B.size());
      gemm::round_to_bf16(A16.data(), A.data(), int64_t(A.size()));
      gemm::round_to_bf16(B16.data(), B.data(), int64_t(B.size()));
      std::vector<float> from_floats(M * N), from_stored(M * N);
      matmul<float>(sh.ta, tb, M, N, K, A.data(), lda, B.data(), ldb, 0.f, from_floats.data(), N);
      matmul<float>(sh.ta, tb, M, N, K, a_stored ? Operand<float>::bf16(A16.data()) : Operand<float>(A.data()), lda,
                    Operand<float>::bf16(B16.data()), ldb, 0.f, from_stored.data(), N);
      EXPECT_EQ(from_floats, from_stored);
    }
  set_matmul_precision(Precision::f32);
  set_bf16_engine(Bf16Engine::automatic);
  set_threads(saved);
}

// --precision auto: bf16 where the process may use AMX's tiles, f32 elsewhere; and a name it
// does not know is a one-line error naming what it expected.
TEST(Precision, AutoPicksBf16OnlyWhereTheCpuHasAmx) {
  const Precision p = use_precision("auto");
  EXPECT_EQ(p, gemm::amx_available() ? Precision::bf16 : Precision::f32);
  EXPECT_EQ(matmul_precision(), p);
  set_matmul_precision(Precision::f32);
  try {
    use_precision("f16");
    FAIL() << "f16 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected f32, bf16 or auto"), std::string::npos) << e.what();
  }
  EXPECT_EQ(matmul_precision(), Precision::f32);
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between bf16 neighbours 1 and 1 + 2^-7: ties go to even (1).
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  // 1 + 3·2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): rounds up to even.
  EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(float_to_bf16(-2.0f), 0xc000);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  EXPECT_TRUE(std::isinf(bf16_to_float(float_to_bf16(INFINITY))));
}

}  // namespace
}  // namespace gmlp
