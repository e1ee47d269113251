// Softmax self-attention on packed token-major QKV: gradients against central finite differences
// in double (loss Σ r ⊙ o), the fast float op against its plain _ref twin, the probabilities'
// rows, the head/batch layout on inputs whose answer is known by hand, and bf16 matmuls.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "check.h"
#include "core/gemm.h"
#include "core/matmul.h"
#include "ops/attention.h"
#include "tolerances.h"

namespace gmlp {
namespace {

using test::close;
using test::randn;
using Vec = std::vector<double>;

using test::dot;
using test::expect_fd;

// Whether every row of a (B, heads, N, N) probability tensor has its entries in [0, 1] (so
// finite) and sums to 1 within tol.
template <class T>
::testing::AssertionResult rows_are_distributions(const std::vector<T>& P, AttnShape s, double tol) {
  const int64_t rows = s.B * s.heads * s.N;
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < s.N; ++j) {
      const double p = P[r * s.N + j];
      if (!(p >= 0 && p <= 1)) return ::testing::AssertionFailure() << "P row " << r << " col " << j << " = " << p;
      sum += p;
    }
    if (!(std::abs(sum - 1) <= tol)) return ::testing::AssertionFailure() << "P row " << r << " sums to " << sum;
  }
  return ::testing::AssertionSuccess();
}

TEST(Attention, GradientsMatchFiniteDifferences) {
  const AttnShape s{4, 3, 2, 3};  // N, B, heads, dh
  const int64_t M = s.N * s.B, W = s.width();
  Rng rng(41);
  Vec qkv = randn<double>(M * 3 * W, rng), r = randn<double>(M * W, rng);
  Vec o(M * W), P(s.B * s.heads * s.N * s.N), scratch(P.size());
  auto loss = [&] {
    attention_forward(o.data(), P.data(), qkv.data(), s);
    return dot(r, o);
  };
  loss();
  // dqkv is overwritten: NaN already there must not leak into it.
  Vec dqkv(M * 3 * W, std::nan(""));
  attention_backward(dqkv.data(), r.data(), qkv.data(), P.data(), s, scratch.data());
  expect_fd("dqkv", qkv, dqkv, loss);
  // The reference backward, against the same differences (of the reference forward).
  Vec dqkv_ref(M * 3 * W, std::nan(""));
  attention_backward_ref(dqkv_ref.data(), r.data(), qkv.data(), s);
  expect_fd("dqkv_ref", qkv, dqkv_ref, [&] {
    attention_forward_ref(o.data(), qkv.data(), s);
    return dot(r, o);
  });
}

TEST(Attention, ScoreBiasGradientsMatchFiniteDifferences) {
  // T5's relative position bias: one (heads, N, N) score bias shared by the batch.
  const AttnShape s{5, 3, 2, 3};
  const int64_t M = s.N * s.B, W = s.width();
  Rng rng(43);
  Vec qkv = randn<double>(M * 3 * W, rng), r = randn<double>(M * W, rng);
  Vec bias = randn<double>(s.heads * s.N * s.N, rng);
  Vec o(M * W), P(s.B * s.heads * s.N * s.N), scratch(P.size());
  auto loss = [&] {
    attention_forward(o.data(), P.data(), qkv.data(), s, bias.data());
    return dot(r, o);
  };
  loss();
  Vec dqkv(M * 3 * W, std::nan("")), dbias(bias.size(), 0.0);
  attention_backward(dqkv.data(), r.data(), qkv.data(), P.data(), s, scratch.data(), dbias.data());
  expect_fd("dqkv with bias", qkv, dqkv, loss);
  expect_fd("dbias", bias, dbias, loss);
  Vec dqkv_ref(M * 3 * W, std::nan("")), dbias_ref(bias.size(), 0.0), o_ref(M * W);
  attention_forward_ref(o_ref.data(), qkv.data(), s, bias.data());
  attention_backward_ref(dqkv_ref.data(), r.data(), qkv.data(), s, bias.data(), dbias_ref.data());
  EXPECT_TRUE(close("ref o with bias", o_ref, o, tol::kFdRel));
  EXPECT_TRUE(close("ref dqkv with bias", dqkv_ref, dqkv, tol::kFdRel));
  EXPECT_TRUE(close("ref dbias", dbias_ref, dbias, tol::kFdRel));
}

TEST(Attention, KeyBiasMasksPaddedKeys) {
  // A (B, N) key bias of -1e9 on some keys: their probabilities are exactly 0 for every query
  // and head, the rest still sum to 1, and fast and reference agree (forward and backward).
  const AttnShape s{6, 2, 2, 3};
  const int64_t M = s.N * s.B, W = s.width();
  Rng rng(47);
  Vec qkv = randn<double>(M * 3 * W, rng), r = randn<double>(M * W, rng);
  Vec key_bias(s.B * s.N, 0.0);
  key_bias[4] = key_bias[5] = key_bias[s.N + 5] = -1e9;
  Vec o(M * W), P(s.B * s.heads * s.N * s.N), scratch(P.size()), dqkv(M * 3 * W);
  const double* no_bias = nullptr;
  attention_forward(o.data(), P.data(), qkv.data(), s, no_bias, key_bias.data());
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.N; ++i)
        for (int64_t j = 0; j < s.N; ++j)
          if (key_bias[b * s.N + j] != 0) {
            EXPECT_EQ(P[((b * s.heads + h) * s.N + i) * s.N + j], 0.0);
          }
  EXPECT_TRUE(rows_are_distributions(P, s, 1e-12));
  attention_backward(dqkv.data(), r.data(), qkv.data(), P.data(), s, scratch.data());
  Vec o_ref(M * W), dqkv_ref(M * 3 * W);
  attention_forward_ref(o_ref.data(), qkv.data(), s, no_bias, key_bias.data());
  attention_backward_ref(dqkv_ref.data(), r.data(), qkv.data(), s, no_bias, static_cast<double*>(nullptr),
                         key_bias.data());
  EXPECT_TRUE(close("o with key bias", o_ref, o, tol::kFdRel));
  EXPECT_TRUE(close("dqkv with key bias", dqkv_ref, dqkv, tol::kFdRel));
  auto loss = [&] {
    attention_forward(o.data(), P.data(), qkv.data(), s, no_bias, key_bias.data());
    return dot(r, o);
  };
  expect_fd("dqkv with key bias", qkv, dqkv, loss);
}

TEST(Attention, ProbabilityRowsSumToOne) {
  // Double: exact up to rounding. Float: sums of N float terms, as in a fast-vs-ref comparison.
  const AttnShape s{9, 2, 3, 5};
  const int64_t M = s.N * s.B, W = s.width();
  Rng rng(42);
  Vec qkv = randn<double>(M * 3 * W, rng, 2.0), o(M * W), P(s.B * s.heads * s.N * s.N);
  attention_forward(o.data(), P.data(), qkv.data(), s);
  EXPECT_TRUE(rows_are_distributions(P, s, 1e-14));
  const AttnShape sf{49, 5, 4, 16};
  auto qkvf = randn<float>(sf.N * sf.B * 3 * sf.width(), rng, 2.0);
  std::vector<float> of(sf.N * sf.B * sf.width()), Pf(sf.B * sf.heads * sf.N * sf.N);
  attention_forward(of.data(), Pf.data(), qkvf.data(), sf);
  EXPECT_TRUE(rows_are_distributions(Pf, sf, tol::kFastVsRef));
}

TEST(Attention, StableForLargeLogits) {
  // q and k of size ~100 give scaled logits of size ~1e4: exp overflows (in float and in
  // double) unless the row max is subtracted first.
  const AttnShape s{13, 2, 2, 8};
  const int64_t M = s.N * s.B, W = s.width();
  Rng rng(43);
  auto qkv = randn<float>(M * 3 * W, rng);
  for (int64_t r = 0; r < M; ++r)
    for (int64_t c = 0; c < 2 * W; ++c) qkv[r * 3 * W + c] *= 100.f;
  std::vector<float> o(M * W), P(s.B * s.heads * s.N * s.N), dqkv(M * 3 * W), scratch(P.size());
  attention_forward(o.data(), P.data(), qkv.data(), s);
  EXPECT_TRUE(rows_are_distributions(P, s, tol::kFastVsRef));
  for (float x : o) ASSERT_TRUE(std::isfinite(x));
  auto dout = randn<float>(M * W, rng);
  attention_backward(dqkv.data(), dout.data(), qkv.data(), P.data(), s, scratch.data());
  for (float x : dqkv) ASSERT_TRUE(std::isfinite(x));
}

TEST(Attention, HeadAndBatchLayout) {
  // Head 0: q = 0, so attention is uniform and o = the mean of v over the batch item's own
  // tokens. Head 1: k_m = e_m and q_n = c·e_π(n) with a logit gap of 60, so token n attends
  // (to within e^-60) to token π(n) alone and o_n = v_π(n). Checks where q, k, v and o of each
  // head and batch item live, independently of the reference.
  const AttnShape s{5, 3, 2, 6};  // dh ≥ N for the one-hot keys
  const int64_t N = s.N, B = s.B, W = s.width(), C = 3 * W, dh = s.dh;
  const int64_t perm[5] = {3, 0, 4, 1, 2};
  Rng rng(44);
  Vec qkv = randn<double>(N * B * C, rng);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < B; ++b) {
      double* row = qkv.data() + (n * B + b) * C;
      for (int64_t d = 0; d < dh; ++d) {
        row[d] = 0;                                                     // q, head 0
        row[dh + d] = d == perm[n] ? 60.0 * std::sqrt(double(dh)) : 0;  // q, head 1
        row[W + dh + d] = d == n ? 1.0 : 0.0;                           // k, head 1
      }
    }
  Vec o(N * B * W, std::nan("")), P(B * s.heads * N * N);
  attention_forward(o.data(), P.data(), qkv.data(), s);
  Vec expect(N * B * W);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t d = 0; d < dh; ++d) {
        double mean = 0;
        for (int64_t m = 0; m < N; ++m) mean += qkv[(m * B + b) * C + 2 * W + d] / double(N);
        expect[(n * B + b) * W + d] = mean;
        expect[(n * B + b) * W + dh + d] = qkv[(perm[n] * B + b) * C + 2 * W + dh + d];
      }
  EXPECT_TRUE(close("o", o, expect, 1e-12));
  Vec o_ref(N * B * W);
  attention_forward_ref(o_ref.data(), qkv.data(), s);
  EXPECT_TRUE(close("o_ref", o_ref, expect, 1e-12));
  // P (B, heads, N, N): batch 2, head 1, query 0 puts its weight on key π(0) = 3.
  EXPECT_NEAR(P[((2 * s.heads + 1) * N + 0) * N + 3], 1.0, 1e-12);
}

// Fast float against _ref on a tiny shape (dh below a SIMD width) and a ViT-like one (a 7×7
// patch grid, 4 heads of 16).
TEST(FastVsRef, Attention) {
  for (const AttnShape s : {AttnShape{7, 3, 2, 4}, AttnShape{49, 5, 4, 16}}) {
    SCOPED_TRACE(::testing::Message() << "N " << s.N << " B " << s.B << " heads " << s.heads << " dh " << s.dh);
    const int64_t M = s.N * s.B, W = s.width();
    Rng rng(45 + s.N);
    auto qkv = randn<float>(M * 3 * W, rng), dout = randn<float>(M * W, rng);
    std::vector<float> o1(M * W, std::nanf("")), o2(M * W), P(s.B * s.heads * s.N * s.N);
    attention_forward(o1.data(), P.data(), qkv.data(), s);
    attention_forward_ref(o2.data(), qkv.data(), s);
    EXPECT_TRUE(close("o", o1, o2, tol::kFastVsRef));
    std::vector<float> d1(M * 3 * W, std::nanf("")), d2(M * 3 * W);
    std::vector<float> scratch(P.size(), std::nanf(""));
    attention_backward(d1.data(), dout.data(), qkv.data(), P.data(), s, scratch.data());
    attention_backward_ref(d2.data(), dout.data(), qkv.data(), s);
    EXPECT_TRUE(close("dqkv", d1, d2, tol::kFastVsRef));
  }
}

TEST(Attention, Bf16MatchesF32) {
  // The (image, head) pairs' products run in bf16 inside the parallel region. bf16 rounds each
  // operand to 8 mantissa bits, so this is the bar the whole-model bf16 test uses
  // (test_model.cpp), not a float one.
  if (!gemm::bf16_available()) GTEST_SKIP() << "no bf16 product on this CPU";
  const AttnShape s{49, 5, 4, 16};
  const int64_t M = s.N * s.B, W = s.width();
  Rng rng(46);
  auto qkv = randn<float>(M * 3 * W, rng), dout = randn<float>(M * W, rng);
  std::vector<float> o(M * W), o_ref(M * W), P(s.B * s.heads * s.N * s.N), scratch(P.size());
  std::vector<float> d(M * 3 * W), d_ref(M * 3 * W);
  set_matmul_precision(Precision::bf16);
  attention_forward(o.data(), P.data(), qkv.data(), s);
  attention_backward(d.data(), dout.data(), qkv.data(), P.data(), s, scratch.data());
  set_matmul_precision(Precision::f32);
  attention_forward_ref(o_ref.data(), qkv.data(), s);
  attention_backward_ref(d_ref.data(), dout.data(), qkv.data(), s);
  EXPECT_TRUE(rows_are_distributions(P, s, tol::kFastVsRef));
  EXPECT_TRUE(close("o", o, o_ref, 0.05));
  EXPECT_TRUE(close("dqkv", d, d_ref, 0.05));
  EXPECT_FALSE(close("o", o, o_ref, 1e-6)) << "bf16 must actually round";
}

}  // namespace
}  // namespace gmlp
