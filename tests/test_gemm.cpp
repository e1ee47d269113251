// gmlp's own f32 matrix product (core/gemm.h) against a double-precision product: every
// transposition, accumulate or not, strided operands, shapes that are not multiples of the
// tiles and that cross the K and N blocks; and the same bits on 1 or 2 threads or inside a
// parallel region.
#include "core/gemm.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

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

// Operands with row strides 3 more than needed (the padding holds NaN: it must never be read).
Operands make(const Case& c, uint64_t seed) {
  Rng rng(seed);
  Operands o;
  const int64_t a_rows = c.ta ? c.K : c.M, a_cols = c.ta ? c.M : c.K;
  const int64_t b_rows = c.tb ? c.N : c.K, b_cols = c.tb ? c.K : c.N;
  o.lda = a_cols + 3, o.ldb = b_cols + 3, o.ldc = c.N + 3;
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

std::vector<float> run(const Case& c, const Operands& o) {
  std::vector<float> C = o.C;
  gemm::sgemm(c.ta, c.tb, c.M, c.N, c.K, o.A.data(), o.lda, o.B.data(), o.ldb, c.accumulate, C.data(), o.ldc);
  return C;
}

// |computed - exact| ≤ γ_(K+1) · (Σ_k |a_ik b_kj| + |c_ij|), the bound of a float sum of K + 1
// terms in any order (γ_n = n·u / (1 - n·u), u = 2^-24), plus the rounding of the inputs: none,
// the inputs are floats and the reference sums their exact products in double.
void expect_close(const Case& c, const Operands& o, const std::vector<float>& C) {
  const double u = std::ldexp(1.0, -24), gamma = double(c.K + 1) * u / (1 - double(c.K + 1) * u);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      double exact = c.accumulate ? double(o.C[i * o.ldc + j]) : 0.0, magnitude = std::abs(exact);
      for (int64_t k = 0; k < c.K; ++k) {
        const double a = c.ta ? o.A[k * o.lda + i] : o.A[i * o.lda + k];
        const double b = c.tb ? o.B[j * o.ldb + k] : o.B[k * o.ldb + j];
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
  const int64_t shapes[][3] = {{1, 1, 1},      {6, 16, 8},    {7, 17, 9},  {5, 33, 1},     {49, 49, 128},
                               {13, 100, 300}, {100, 7, 513}, {2, 40, 64}, {130, 3100, 20}};
  for (const auto& s : shapes)
    for (int t = 0; t < 8; ++t) out.push_back({bool(t & 1), bool(t & 2), bool(t & 4), s[0], s[1], s[2]});
  return out;
}

TEST(Gemm, MatchesTheDoubleProductWithinTheFloatSumBound) {
  if (!gemm::available()) GTEST_SKIP() << "no AVX2 or AVX-512 on this CPU";
  uint64_t seed = 1;
  for (const Case& c : cases()) {
    const Operands o = make(c, seed++);
    expect_close(c, o, run(c, o));
  }
}

TEST(Gemm, SameBitsOnAnyThreadCountAndInsideAParallelRegion) {
  if (!gemm::available()) GTEST_SKIP() << "no AVX2 or AVX-512 on this CPU";
  const int threads = omp_get_max_threads();
  uint64_t seed = 100;
  for (Case c : {Case{false, false, false, 300, 200, 300}, Case{false, true, true, 520, 64, 600},
                 Case{true, false, false, 7, 3100, 300}, Case{true, true, true, 97, 130, 257}}) {
    const Operands o = make(c, seed++);
    omp_set_num_threads(1);
    const std::vector<float> one = run(c, o);
    omp_set_num_threads(2);
    const std::vector<float> two = run(c, o);
    omp_set_num_threads(threads);
    std::vector<float> nested;
#pragma omp parallel num_threads(2)
    {
#pragma omp single
      nested = run(c, o);
    }
    ASSERT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(float))) << c.M << "x" << c.N << "x" << c.K;
    ASSERT_EQ(0, std::memcmp(one.data(), nested.data(), one.size() * sizeof(float))) << c.M << "x" << c.N << "x" << c.K;
    expect_close(c, o, one);
  }
}

// The epilogue sees every element of C exactly once, after its whole sum: each call finds its
// block final (equal to the product without an epilogue) and marks it; blocks never overlap.
TEST(Gemm, EpilogueVisitsEachFinishedElementOnce) {
  if (!gemm::available()) GTEST_SKIP() << "no AVX2 or AVX-512 on this CPU";
  const int threads = omp_get_max_threads();
  uint64_t seed = 200;
  for (const Case& c : cases())
    for (const int t : {1, 2}) {
      const Operands o = make(c, seed++);
      const std::vector<float> plain = run(c, o);
      std::vector<float> C = o.C;
      std::vector<int> seen(size_t(c.M * c.N), 0);
      std::atomic<int> early{0};  // elements passed to the epilogue before their sum was complete
      const auto visit = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
        for (int64_t i = r0; i < r1; ++i)
          for (int64_t j = c0; j < c1; ++j) {
            if (std::memcmp(&C[i * o.ldc + j], &plain[i * o.ldc + j], sizeof(float)) != 0) ++early;
#pragma omp atomic
            ++seen[i * c.N + j];
          }
      };
      const gemm::Epilogue mark(visit);
      omp_set_num_threads(t);
      gemm::sgemm(c.ta, c.tb, c.M, c.N, c.K, o.A.data(), o.lda, o.B.data(), o.ldb, c.accumulate, C.data(), o.ldc,
                  &mark);
      omp_set_num_threads(threads);
      EXPECT_EQ(early.load(), 0) << c.M << "x" << c.N << "x" << c.K << " on " << t << " threads";
      for (int64_t i = 0; i < c.M * c.N; ++i)
        ASSERT_EQ(seen[i], 1) << "element " << i << " of " << c.M << "x" << c.N << "x" << c.K << " on " << t
                              << " threads";
    }
}

}  // namespace
}  // namespace gmlp
