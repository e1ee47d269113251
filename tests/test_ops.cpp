// Per-op checks: every backward against central finite differences in double precision (on a
// loss Σ r ⊙ f(inputs) with random r), backward accumulation (+=), and every fast float op
// against its plain _ref twin on shapes large enough to take oneDNN's blocked paths.
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "check.h"
#include "core/bf16.h"
#include "core/cpu_features.h"
#include "core/gemm.h"
#include "core/matmul.h"
#include "core/row_sum.h"
#include "core/threads.h"
#include "ops/cross_entropy.h"
#include "ops/gelu.h"
#include "ops/layernorm.h"
#include "ops/linear.h"
#include "ops/patch_embed.h"
#include "ops/pool.h"
#include "ops/residual.h"
#include "ops/row_bias.h"
#include "ops/sgu.h"
#include "tolerances.h"

namespace gmlp {
namespace {

using test::close;
using test::randn;
using Vec = std::vector<double>;

using test::dot;
using test::expect_fd;

TEST(Linear, GradientsMatchFiniteDifferences) {
  const int64_t M = 5, in = 4, out = 3;
  Rng rng(1);
  Vec x = randn<double>(M * in, rng), W = randn<double>(out * in, rng), b = randn<double>(out, rng);
  Vec r = randn<double>(M * out, rng), y(M * out);
  auto loss = [&] {
    linear_forward(y.data(), x.data(), W.data(), b.data(), M, in, out);
    return dot(r, y);
  };
  // Gradients start non-zero: backward must add to them, not overwrite.
  Vec dx0 = randn<double>(M * in, rng), dW0 = randn<double>(out * in, rng), db0 = randn<double>(out, rng);
  Vec dx = dx0, dW = dW0, db = db0;
  linear_backward(dx.data(), dW.data(), db.data(), r.data(), x.data(), W.data(), M, in, out);
  expect_fd("dx", x, dx, dx0, loss);
  expect_fd("dW", W, dW, dW0, loss);
  expect_fd("db", b, db, db0, loss);
}

TEST(LayerNorm, StridedGradientsMatchFiniteDifferences) {
  // Strided rows (ldx 9, ldy 8 for C 6), the way the gate normalises half of its input.
  const int64_t M = 4, C = 6, ldx = 9, ldy = 8;
  Rng rng(2);
  Vec x = randn<double>(M * ldx, rng, 2.0), gamma = randn<double>(C, rng), beta = randn<double>(C, rng);
  Vec r = randn<double>(M * ldy, rng), y(M * ldy), mean(M), rstd(M);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t c = C; c < ldy; ++c) r[i * ldy + c] = 0;  // padding is not an output
  auto loss = [&] {
    layernorm_forward(y.data(), ldy, mean.data(), rstd.data(), x.data(), ldx, gamma.data(), beta.data(), M, C, 1e-5);
    return dot(r, y);
  };
  loss();
  Vec dx0(M * ldx, 0.5), dg0 = randn<double>(C, rng), db0 = randn<double>(C, rng);
  Vec dx = dx0, dg = dg0, db = db0;
  layernorm_backward(dx.data(), ldx, dg.data(), db.data(), r.data(), ldy, x.data(), ldx, mean.data(), rstd.data(),
                     gamma.data(), M, C);
  expect_fd("dx", x, dx, dx0, loss);
  expect_fd("dgamma", gamma, dg, dg0, loss);
  expect_fd("dbeta", beta, db, db0, loss);
}

TEST(Gelu, GradientMatchesFiniteDifferences) {
  const int64_t n = 41;
  Vec x(n), y(n), r;
  for (int64_t i = 0; i < n; ++i) x[i] = -5.0 + 0.25 * double(i);  // covers both tails and 0
  Rng rng(3);
  r = randn<double>(n, rng);
  auto loss = [&] {
    gelu_forward(y.data(), x.data(), n);
    return dot(r, y);
  };
  Vec dx0 = randn<double>(n, rng), dx = dx0;
  gelu_backward(dx.data(), r.data(), x.data(), n);
  expect_fd("dx", x, dx, dx0, loss);
}

// Every gate, with and without aMLP's residual input, on one image and on five, two threads;
// with res, tokens 3 and 4 of each image are padding (left out of the token mix).
TEST(Sgu, GradientsMatchFiniteDifferences) {
  const test::WithThreads two(2);
  for (const char* gate : {"split", "multiplicative", "additive", "linear"})
    for (const int64_t B : {1, 5})
      for (const bool with_res : {false, true}) {
        SCOPED_TRACE(std::string(gate) + " B=" + std::to_string(B) + (with_res ? " res, padding" : ""));
        std::vector<uint8_t> pad(size_t(B) * 5, 0);
        for (int64_t b = 0; b < B; ++b) pad[size_t(b * 5 + 3)] = pad[size_t(b * 5 + 4)] = 1;
        const SguShape s{5, B, 8, parse_sgu_gate(gate), with_res ? pad.data() : nullptr};  // N, B, F
        const int64_t M = s.rows(), H = s.H(), N = s.N;
        Rng rng(4);
        Vec z = randn<double>(M * s.F, rng), gamma = randn<double>(H, rng), beta = randn<double>(H, rng);
        Vec W = randn<double>(N * N, rng, 0.5), b = randn<double>(N, rng), res = randn<double>(M * H, rng);
        Vec r = randn<double>(M * H, rng), out(M * H), mean(M), rstd(M), g(M * H);
        const double* res_in = with_res ? res.data() : nullptr;
        auto loss = [&] {
          sgu_forward(out.data(), mean.data(), rstd.data(), g.data(), z.data(), gamma.data(), beta.data(), W.data(),
                      b.data(), s, 1e-5, res_in);
          return dot(r, out);
        };
        loss();
        // dz and dres are overwritten (NaN in them must not leak); the parameter gradients accumulate.
        Vec dz0(M * s.F, 0.0), dgm0(H, 0.1), dbt0(H, -0.2), dW0(N * N, 0.3), db0(N, 0.4), dres0(M * H, 0.0);
        Vec dz(M * s.F, std::nan("")), dgm = dgm0, dbt = dbt0, dW = dW0, db = db0;
        Vec dres(M * H, std::nan(""));
        sgu_backward(dz.data(), dgm.data(), dbt.data(), dW.data(), db.data(), r.data(), z.data(), mean.data(),
                     rstd.data(), g.data(), gamma.data(), beta.data(), W.data(), s, with_res ? dres.data() : nullptr);
        expect_fd("dz", z, dz, dz0, loss);
        expect_fd("dgamma", gamma, dgm, dgm0, loss);
        expect_fd("dbeta", beta, dbt, dbt0, loss);
        expect_fd("dW", W, dW, dW0, loss);
        expect_fd("db", b, db, db0, loss);
        if (with_res) expect_fd("dres", res, dres, dres0, loss);
      }
}

// float GELU against the exact function in double, every 1e-4 over [-10, 10] and at the ends of
// the quartics' intervals: on AVX-512 (ops/gelu_avx512.h's piecewise quartics) y within 1.5e-7 of
// max(1, |y|) (9.3e-8 measured) and the slope within 1.5e-7 (8.5e-8); elsewhere (the rational
// erf and exp) 1e-6 and 2.5e-7 (9.3e-7, 2.0e-7). Each element is computed alone: the same bits
// at any position, in a whole vector or in a part-vector at the end.
TEST(Gelu, FloatIsTheExactFunctionToFloatPrecision) {
  std::vector<float> x;
  for (int i = -100000; i <= 100000; ++i) x.push_back(float(i * 1e-4));
  for (int j = 0; j <= 32; ++j) x.push_back(float(j * 0.1875)), x.push_back(-float(j * 0.1875));
  const int64_t n = int64_t(x.size());
  std::vector<float> y(n), slope(n), d(n, 1.f);
  gelu_forward_serial(y.data(), x.data(), n, slope.data());
  gelu_backward_inplace(d.data(), x.data(), n);
  double worst_y = 0, worst_slope = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double z = x[i], cdf = 0.5 * std::erfc(-z / std::sqrt(2.0));
    const double want_slope = cdf + z * std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
    worst_y = std::max(worst_y, std::abs(y[i] - z * cdf) / std::max(1.0, std::abs(z * cdf)));
    worst_slope = std::max(worst_slope, std::abs(slope[i] - want_slope));
    ASSERT_EQ(d[i], slope[i]) << "the backward's slope at " << z;
  }
  const bool quartics = cpu_features().avx512f;
  EXPECT_LT(worst_y, quartics ? 1.5e-7 : 1e-6);
  EXPECT_LT(worst_slope, quartics ? 1.5e-7 : 2.5e-7);
  for (const int64_t len : {int64_t(1), int64_t(15), int64_t(17), int64_t(37)})
    for (int64_t start = 0; start + len <= 200; start += len) {
      std::vector<float> part(len), part_slope(len);
      const int64_t at = 99900 + start;  // around 0, where the sign changes
      gelu_forward_serial(part.data(), x.data() + at, len, part_slope.data());
      for (int64_t i = 0; i < len; ++i) {
        ASSERT_EQ(part[i], y[at + i]) << "length " << len << ", element " << i;
        ASSERT_EQ(part_slope[i], slope[at + i]) << "length " << len << ", element " << i;
      }
    }
}

TEST(Gelu, InPlaceBackwardMatchesAccumulating) {
  const int64_t n = 37;
  Rng rng(31);
  Vec x = randn<double>(n, rng, 2.0), dy = randn<double>(n, rng), dx(n, 0.0);
  gelu_backward(dx.data(), dy.data(), x.data(), n);
  gelu_backward_inplace(dy.data(), x.data(), n);
  EXPECT_TRUE(close("d", dy, dx, 1e-15));
}

TEST(LayerNorm, OverwriteIgnoresWhatWasThere) {
  const int64_t M = 3, C = 5;
  Rng rng(32);
  Vec x = randn<double>(M * C, rng), gamma = randn<double>(C, rng), beta = randn<double>(C, rng);
  Vec dy = randn<double>(M * C, rng), y(M * C), mean(M), rstd(M), dg(C), db(C);
  layernorm_forward(y.data(), C, mean.data(), rstd.data(), x.data(), C, gamma.data(), beta.data(), M, C, 1e-5);
  Vec acc(M * C, 0.0), over(M * C, std::nan(""));
  layernorm_backward(acc.data(), C, dg.data(), db.data(), dy.data(), C, x.data(), C, mean.data(), rstd.data(),
                     gamma.data(), M, C);
  layernorm_backward(over.data(), C, dg.data(), db.data(), dy.data(), C, x.data(), C, mean.data(), rstd.data(),
                     gamma.data(), M, C, Write::overwrite);
  EXPECT_TRUE(close("dx", over, acc, 1e-15));
}

TEST(MeanPool, GradientMatchesFiniteDifferences) {
  const int64_t N = 4, B = 3, D = 5;
  Rng rng(5);
  Vec x = randn<double>(N * B * D, rng), r = randn<double>(B * D, rng), y(B * D);
  auto loss = [&] {
    mean_pool_forward(y.data(), x.data(), N, B, D);
    return dot(r, y);
  };
  Vec dx0 = randn<double>(N * B * D, rng), dx = dx0;
  mean_pool_backward(dx.data(), r.data(), N, B, D);
  expect_fd("dx", x, dx, dx0, loss);
}

TEST(CrossEntropy, GradientMatchesFiniteDifferences) {
  const int64_t B = 4, K = 6;
  Rng rng(6);
  Vec logits = randn<double>(B * K, rng, 3.0), probs(B * K), dl(B * K);
  const std::vector<int32_t> labels = {0, 5, 2, 2};
  for (double smoothing : {0.0, 0.1}) {
    auto loss = [&] { return cross_entropy_forward(probs.data(), logits.data(), labels.data(), B, K, smoothing); };
    loss();
    cross_entropy_backward(dl.data(), probs.data(), labels.data(), B, K, smoothing);
    expect_fd("dlogits", logits, dl, Vec(B * K, 0.0), loss);
  }
}

TEST(CrossEntropy, MatchesHandComputedValue) {
  // Two classes, logits (0, ln 3): p = (1/4, 3/4). Label 1, smoothing 0.2:
  // q = (0.1, 0.9), loss = -(0.1 ln 1/4 + 0.9 ln 3/4).
  const double logits[2] = {0.0, std::log(3.0)};
  double probs[2];
  const int32_t label = 1;
  const double loss = cross_entropy_forward(probs, logits, &label, 1, 2, 0.2);
  EXPECT_NEAR(loss, -(0.1 * std::log(0.25) + 0.9 * std::log(0.75)), 1e-12);
  EXPECT_NEAR(probs[1], 0.75, 1e-12);
}

TEST(Residual, DropPathGradientMatchesFiniteDifferences) {
  const int64_t N = 3, B = 4, D = 2;
  Rng rng(7);
  Vec x = randn<double>(N * B * D, rng), y = randn<double>(N * B * D, rng);
  Vec keep = {0.0, 1.25, 1.25, 0.0}, r = randn<double>(N * B * D, rng), out(N * B * D);
  auto loss = [&] {
    residual_forward(out.data(), x.data(), y.data(), keep.data(), N, B, D);
    return dot(r, out);
  };
  Vec dy(N * B * D);
  residual_backward(dy.data(), r.data(), keep.data(), N, B, D);
  expect_fd("dy", y, dy, Vec(N * B * D, 0.0), loss);
}

TEST(Residual, DropPathKeepsExpectedFraction) {
  Rng rng(8);
  std::vector<float> keep(20000);
  drop_path_sample(keep.data(), int64_t(keep.size()), 0.25, rng);
  double kept = 0, mean = 0;
  for (float k : keep) {
    EXPECT_TRUE(k == 0.f || std::abs(k - 1.f / 0.75f) < 1e-6f);
    kept += k > 0;
    mean += k;
  }
  EXPECT_NEAR(kept / keep.size(), 0.75, 0.015);  // ~5 sd of a Binomial(20000, 0.75) fraction
  EXPECT_NEAR(mean / keep.size(), 1.0, 0.02);    // the expectation is preserved
}

TEST(PatchEmbed, PatchifyMatchesReference) {
  const PatchShape s{3, 2, 12, 4};
  Rng rng(9);
  auto img = randn<float>(s.B * s.C * s.S * s.S, rng);
  std::vector<float> a(s.tokens() * s.B * s.patch_dim()), b(a.size());
  patchify(a.data(), img.data(), s);
  patchify_ref(b.data(), img.data(), s);
  EXPECT_EQ(a, b);
  // Token 4 of a 3×3 grid is the centre patch; its first element is pixel (c 0, y 4, x 4).
  EXPECT_EQ(a[(4 * s.B + 1) * s.patch_dim()], img[((1 * s.C + 0) * s.S + 4) * s.S + 4]);
}

// Fast float ops against _ref, shapes chosen to be ragged (no multiple of a SIMD width) and
// large enough for oneDNN's blocked kernels.
TEST(FastVsRef, Linear) {
  const int64_t M = 97, in = 75, out = 131;
  Rng rng(10);
  auto x = randn<float>(M * in, rng), W = randn<float>(out * in, rng, 0.1), b = randn<float>(out, rng);
  auto dy = randn<float>(M * out, rng);
  std::vector<float> y1(M * out), y2(M * out);
  linear_forward(y1.data(), x.data(), W.data(), b.data(), M, in, out);
  linear_forward_ref(y2.data(), x.data(), W.data(), b.data(), M, in, out);
  EXPECT_TRUE(close("y", y1, y2, tol::kFastVsRef));
  std::vector<float> dx1(M * in, 1.f), dW1(out * in, 1.f), db1(out, 1.f);
  auto dx2 = dx1, dW2 = dW1, db2 = db1;
  linear_backward(dx1.data(), dW1.data(), db1.data(), dy.data(), x.data(), W.data(), M, in, out);
  linear_backward_ref(dx2.data(), dW2.data(), db2.data(), dy.data(), x.data(), W.data(), M, in, out);
  EXPECT_TRUE(close("dx", dx1, dx2, tol::kFastVsRef));
  EXPECT_TRUE(close("dW", dW1, dW2, tol::kFastVsRef, 10.0));  // sums of 97 O(1) products
  EXPECT_TRUE(close("db", db1, db2, tol::kFastVsRef, 10.0));
}

// GELU fused into the product: y = gelu_forward(the unfused layer's output), bit for bit, and
// the slope it saves turns a gradient as gelu_backward_inplace does, on 1 and 2 threads, at a
// shape that crosses the product's K block (256) and is no multiple of its tiles; inference
// (no slope) the same y.
TEST(FastVsRef, LinearWithFusedGeluIsTheUnfusedLayerBitForBit) {
  const int64_t M = 301, in = 300, out = 133;
  Rng rng(11);
  auto x = randn<float>(M * in, rng), W = randn<float>(out * in, rng, 0.1), b = randn<float>(out, rng);
  const int threads = omp_get_max_threads();
  for (const int t : {1, 2}) {
    omp_set_num_threads(t);
    std::vector<float> plain(M * out), want(M * out), slope(M * out), y(M * out), y_infer(M * out);
    linear_forward(plain.data(), x.data(), W.data(), b.data(), M, in, out);
    gelu_forward(want.data(), plain.data(), M * out);
    linear_forward(y.data(), x.data(), W.data(), b.data(), M, in, out, Activation::gelu, slope.data());
    linear_forward(y_infer.data(), x.data(), W.data(), b.data(), M, in, out, Activation::gelu);
    omp_set_num_threads(threads);
    EXPECT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float))) << t << " threads";
    EXPECT_EQ(0, std::memcmp(y_infer.data(), want.data(), y.size() * sizeof(float))) << t << " threads";
    auto d1 = randn<float>(M * out, rng);
    auto d2 = d1;
    gelu_backward_inplace(d1.data(), plain.data(), M * out);
    std::vector<float> db1(out, 0.5f), db2 = db1, db3 = db1;
    std::vector<uint16_t> d16(M * out);
    auto d3 = d2;
    omp_set_num_threads(t);
    gelu_backward_by_slope(d2.data(), slope.data(), M, out, db2.data());
    column_sum_add(db1.data(), d1.data(), out, M, out);
    if (gemm::bf16_available()) gelu_backward_by_slope(d3.data(), slope.data(), M, out, db3.data(), d16.data());
    omp_set_num_threads(threads);
    EXPECT_EQ(0, std::memcmp(d1.data(), d2.data(), d1.size() * sizeof(float))) << t << " threads";
    EXPECT_EQ(db1, db2) << "the bias gradient summed in the same pass, " << t << " threads";
    if (!gemm::bf16_available()) continue;
    for (int64_t i = 0; i < M * out; ++i) ASSERT_EQ(d16[i], float_to_bf16(d1[i])) << "stored as bf16, element " << i;
    EXPECT_EQ(db1, db3) << "the bias gradient when the result is stored as bf16, " << t << " threads";
  }
}

// A residual summed by the product (a branch's last layer, y = x_in + (h·Wᵀ + b)) is the layer
// followed by residual_forward, bit for bit, on 1 and 2 threads, with and without a bias, at a
// shape that crosses the product's K block and is no multiple of its tiles.
TEST(FastVsRef, LinearAddingTheResidualIsTheLayerThenTheResidualBitForBit) {
  const int64_t N = 7, B = 43, M = N * B, in = 300, out = 133;
  Rng rng(12);
  auto h = randn<float>(M * in, rng), W = randn<float>(out * in, rng, 0.1), b = randn<float>(out, rng);
  auto x_in = randn<float>(M * out, rng);
  const int threads = omp_get_max_threads();
  for (const float* bias : std::initializer_list<const float*>{b.data(), nullptr})
    for (const int t : {1, 2}) {
      omp_set_num_threads(t);
      std::vector<float> y(M * out), want(M * out), got(M * out);
      linear_forward(y.data(), h.data(), W.data(), bias, M, in, out);
      residual_forward(want.data(), x_in.data(), y.data(), static_cast<const float*>(nullptr), N, B, out);
      linear_forward(got.data(), h.data(), W.data(), bias, M, in, out, Activation::none, static_cast<float*>(nullptr),
                     false, x_in.data());
      omp_set_num_threads(threads);
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
          << t << " threads, " << (bias ? "with" : "without") << " bias";
    }
}

// The layer over tokens (the token-mixing layers' W·x + b) with its epilogues gives the bits of
// the passes they replace: the product, then the row bias, then GELU or the residual's sum; and
// its backward through GELU those of the product then GELU's backward from the pre-activation,
// with the weight and bias gradients of their own passes. On 1 and 2 threads, across the
// product's blocks and ragged tiles.
TEST(FastVsRef, TokenLinearWithItsEpiloguesIsTheProductThenThePasses) {
  const int64_t in = 49, hidden = 70, C = 2 * 1600 + 37;
  Rng rng(14);
  auto x = randn<float>(in * C, rng), W1 = randn<float>(hidden * in, rng, 0.2), b1 = randn<float>(hidden, rng);
  auto W2 = randn<float>(in * hidden, rng, 0.2), b2 = randn<float>(in, rng);
  auto res = randn<float>(in * C, rng), dy = randn<float>(in * C, rng);
  const int threads = omp_get_max_threads();
  for (const int t : {1, 2}) {
    SCOPED_TRACE(std::to_string(t) + " threads");
    omp_set_num_threads(t);
    // Forward: a = GELU(W1·x + b1), y = res + (W2·a + b2), as passes and as epilogues.
    std::vector<float> z(hidden * C), a(hidden * C), y(in * C);
    matmul<float>(false, false, hidden, C, in, W1.data(), in, x.data(), C, 0.f, z.data(), C);
    row_bias_forward_ref(z.data(), b1.data(), hidden, C);  // one rounding, as the epilogue's
    gelu_forward(a.data(), z.data(), hidden * C);
    matmul<float>(false, false, in, C, hidden, W2.data(), hidden, a.data(), C, 0.f, y.data(), C);
    row_bias_forward_ref(y.data(), b2.data(), in, C);
    std::vector<float> want_y(in * C);
    residual_forward(want_y.data(), res.data(), y.data(), static_cast<const float*>(nullptr), in, 1, C);
    std::vector<float> got_a(hidden * C), slope(hidden * C), got_y(in * C);
    token_linear_forward(got_a.data(), x.data(), W1.data(), b1.data(), in, hidden, C, Activation::gelu, slope.data());
    token_linear_forward(got_y.data(), got_a.data(), W2.data(), b2.data(), hidden, in, C, Activation::none,
                         static_cast<float*>(nullptr), false, res.data());
    ASSERT_EQ(0, std::memcmp(got_a.data(), a.data(), a.size() * sizeof(float))) << "GELU(W1·x + b1)";
    ASSERT_EQ(0, std::memcmp(got_y.data(), want_y.data(), y.size() * sizeof(float))) << "res + W2·a + b2";
    // Backward of the second layer into GELU's input: da = (W2ᵀ·dy) ⊙ GELU'(z).
    std::vector<float> dW(in * hidden, 0.25f), db(in, 0.5f), da(hidden * C);
    row_bias_backward(db.data(), dy.data(), in, C);
    matmul<float>(false, true, in, hidden, C, dy.data(), C, a.data(), C, 1.f, dW.data(), hidden);
    matmul<float>(true, false, hidden, C, in, W2.data(), hidden, dy.data(), C, 0.f, da.data(), C);
    gelu_backward_inplace(da.data(), z.data(), hidden * C);
    std::vector<float> got_dW(in * hidden, 0.25f), got_db(in, 0.5f), got_da(hidden * C);
    token_linear_backward(got_da.data(), got_dW.data(), got_db.data(), dy.data(), got_a.data(), W2.data(), hidden, in,
                          C, Activation::gelu, slope.data());
    EXPECT_EQ(got_da, da) << "the gradient of GELU's input";
    EXPECT_EQ(got_dW, dW) << "the weight gradient";
    EXPECT_EQ(got_db, db) << "the bias gradient";
  }
  omp_set_num_threads(threads);
}

// In bf16 precision a layer keeps GELU's slope as bfloat16: the forward stores the float slope
// rounded to nearest even, with y unchanged, and every backward that reads it (the fused epilogue,
// the pass with the bias gradient, and the one storing its result as bf16) gives the bits that
// the rounded slope as floats gives, on 1 and 2 threads.
TEST(FastVsRef, GeluSlopeStoredAsBf16ActsAsTheRoundedSlope) {
  const int64_t M = 301, in = 300, out = 133;
  Rng rng(13);
  auto x = randn<float>(M * in, rng), W = randn<float>(out * in, rng, 0.1), b = randn<float>(out, rng);
  std::vector<float> y(M * out), y16(M * out), slope(M * out), slope16(M * out / 2 + 1);
  linear_forward(y.data(), x.data(), W.data(), b.data(), M, in, out, Activation::gelu, slope.data());
  linear_forward(y16.data(), x.data(), W.data(), b.data(), M, in, out, Activation::gelu, slope16.data(), true);
  EXPECT_EQ(y, y16);
  const auto* s16 = reinterpret_cast<const uint16_t*>(slope16.data());
  std::vector<float> rounded(M * out);
  for (int64_t i = 0; i < M * out; ++i) {
    ASSERT_EQ(s16[i], float_to_bf16(slope[i])) << "element " << i;
    rounded[i] = bf16_to_float(s16[i]);
  }
  const int threads = omp_get_max_threads();
  for (const int t : {1, 2}) {
    omp_set_num_threads(t);
    const auto d = randn<float>(M * out, rng);
    auto d1 = d, d2 = d;
    std::vector<float> db1(out, 0.5f), db2 = db1;
    gelu_backward_by_slope(d1.data(), rounded.data(), M, out, db1.data());
    gelu_backward_by_slope(d2.data(), slope16.data(), M, out, db2.data(), nullptr, true);
    EXPECT_EQ(d1, d2) << t << " threads";
    EXPECT_EQ(db1, db2) << "the bias gradient, " << t << " threads";
    if (gemm::bf16_available()) {
      auto d3 = d, d4 = d;
      std::vector<uint16_t> h3(M * out), h4(M * out);
      std::vector<float> db3(out, 0.5f), db4 = db3;
      gelu_backward_by_slope(d3.data(), rounded.data(), M, out, db3.data(), h3.data());
      gelu_backward_by_slope(d4.data(), slope16.data(), M, out, db4.data(), h4.data(), true);
      EXPECT_EQ(h3, h4) << "stored as bf16, " << t << " threads";
      EXPECT_EQ(db3, db4) << "the bias gradient when stored as bf16, " << t << " threads";
    }
    // The next layer's input gradient with GELU's backward fused into its product.
    const auto dy = randn<float>(M * in, rng);
    std::vector<float> dx1(M * out), dx2(M * out), dW1(out * in, 0.f), dW2 = dW1;
    const std::vector<float> Wt = randn<float>(in * out, rng, 0.1);
    linear_backward(dx1.data(), dW1.data(), static_cast<float*>(nullptr), dy.data(), y.data(), Wt.data(), M, out, in,
                    Write::overwrite, Activation::gelu, rounded.data());
    linear_backward(dx2.data(), dW2.data(), static_cast<float*>(nullptr), dy.data(), y.data(), Wt.data(), M, out, in,
                    Write::overwrite, Activation::gelu, slope16.data(), true);
    omp_set_num_threads(threads);
    EXPECT_EQ(dx1, dx2) << "fused into the product, " << t << " threads";
  }
}

// The bias gradient's column sums split rows across threads above 2^15 elements: every row
// counted once, in any thread count, into a strided gradient that already holds values.
TEST(FastVsRef, ColumnSumsSplitAcrossThreads) {
  const int64_t M = 517, C = 131, ld = 140;
  Rng rng(12);
  const auto dy = randn<float>(M * ld, rng);
  std::vector<double> want(C, 0.5);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < C; ++j) want[j] += dy[i * ld + j];
  const int saved = num_threads();
  for (const int threads : {1, 2}) {
    set_threads(threads);
    std::vector<float> db(C, 0.5f);
    column_sum_add(db.data(), dy.data(), ld, M, C);
    // Sums of 517 O(1) terms.
    EXPECT_TRUE(close("db", db, want, tol::kFastVsRef, 10.0)) << threads << " threads";
  }
  set_threads(saved);
}

TEST(FastVsRef, LayerNorm) {
  const int64_t M = 53, C = 77, ld = 160;
  Rng rng(11);
  auto x = randn<float>(M * ld, rng, 3.0), gamma = randn<float>(C, rng), beta = randn<float>(C, rng);
  auto dy = randn<float>(M * ld, rng);
  std::vector<float> y1(M * ld), y2(M * ld), m1(M), m2(M), r1(M), r2(M);
  layernorm_forward(y1.data(), ld, m1.data(), r1.data(), x.data() + 3, ld, gamma.data(), beta.data(), M, C, 1e-6f);
  layernorm_forward_ref(y2.data(), ld, m2.data(), r2.data(), x.data() + 3, ld, gamma.data(), beta.data(), M, C, 1e-6f);
  EXPECT_TRUE(close("y", y1, y2, tol::kFastVsRef));
  EXPECT_TRUE(close("rstd", r1, r2, tol::kFastVsRef));
  std::vector<float> dx1(M * ld, 0.f), dg1(C, 0.f), db1(C, 0.f);
  auto dx2 = dx1, dg2 = dg1, db2 = db1;
  layernorm_backward(dx1.data(), ld, dg1.data(), db1.data(), dy.data(), ld, x.data() + 3, ld, m1.data(), r1.data(),
                     gamma.data(), M, C);
  layernorm_backward_ref(dx2.data(), ld, dg2.data(), db2.data(), dy.data(), ld, x.data() + 3, ld, m2.data(), r2.data(),
                         gamma.data(), M, C);
  EXPECT_TRUE(close("dx", dx1, dx2, tol::kFastVsRef));
  EXPECT_TRUE(close("dgamma", dg1, dg2, tol::kFastVsRef, 10.0));
  EXPECT_TRUE(close("dbeta", db1, db2, tol::kFastVsRef, 10.0));
}

TEST(LayerNorm, BackwardGivesTheSameBitsOnAnyThreadCount) {
  // Rows in several blocks of the column sums, the last one short.
  const int64_t M = 201, C = 40;
  Rng rng(33);
  auto x = randn<float>(M * C, rng, 2.0), gamma = randn<float>(C, rng), beta = randn<float>(C, rng);
  auto dy = randn<float>(M * C, rng);
  std::vector<float> y(M * C), mean(M), rstd(M);
  layernorm_forward(y.data(), C, mean.data(), rstd.data(), x.data(), C, gamma.data(), beta.data(), M, C, 1e-6f);
  const int saved = num_threads();
  std::vector<float> dx1, dg1, db1;
  for (const int threads : {1, 2, 3}) {
    set_threads(threads);
    std::vector<float> dx(M * C, 0.5f), dg(C, 0.25f), db(C, -0.25f);
    layernorm_backward(dx.data(), C, dg.data(), db.data(), dy.data(), C, x.data(), C, mean.data(), rstd.data(),
                       gamma.data(), M, C);
    if (threads == 1) {
      std::vector<double> xd(x.begin(), x.end()), dyd(dy.begin(), dy.end()), gd(gamma.begin(), gamma.end());
      std::vector<double> md(M), rd(M), yd(M * C), dxd(M * C, 0.5), dgd(C, 0.25), dbd(C, -0.25), bd(C, 0.0);
      layernorm_forward_ref(yd.data(), C, md.data(), rd.data(), xd.data(), C, gd.data(), bd.data(), M, C, 1e-6);
      layernorm_backward_ref(dxd.data(), C, dgd.data(), dbd.data(), dyd.data(), C, xd.data(), C, md.data(), rd.data(),
                             gd.data(), M, C);
      EXPECT_TRUE(close("dx", dx, dxd, tol::kFastVsRef));
      EXPECT_TRUE(close("dgamma", dg, dgd, tol::kFastVsRef, 10.0));
      EXPECT_TRUE(close("dbeta", db, dbd, tol::kFastVsRef, 10.0));
      dx1 = dx, dg1 = dg, db1 = db;
      continue;
    }
    for (int64_t i = 0; i < M * C; ++i) ASSERT_EQ(dx[i], dx1[i]) << threads << " threads, dx " << i;
    for (int64_t j = 0; j < C; ++j) {
      ASSERT_EQ(dg[j], dg1[j]) << threads << " threads, dgamma " << j;
      ASSERT_EQ(db[j], db1[j]) << threads << " threads, dbeta " << j;
    }
  }
  set_threads(saved);
}

// row_sum (core/row_sum.h) adds in the order it states, whatever the CPU: element c into partial
// sum c mod 64 (floats) or c mod 32 (doubles), four vectors of them added (0 + 2) + (1 + 3), then the
// lanes of the result added pairwise, each time the upper half onto the lower. Checked against
// that order spelt out here, bit for bit, for the vector code (AVX-512 or AVX2, whichever this
// build has) and the portable code alike, one sum and two at once, at lengths with and without a
// short last block and fewer blocks than vectors, with NaN past the row (never read), and against
// the double sum within the float-sum bound.
template <class T>
T sum_in_the_stated_order(const std::vector<T>& x, int64_t n) {
  constexpr int64_t W = 64 / int64_t(sizeof(T));
  std::vector<T> part(size_t(4 * W), T(0));  // part[g·W + l]: vector g, lane l
  for (int64_t c = 0; c < n; ++c) part[size_t((c / W) % 4 * W + c % W)] += x[size_t(c)];
  std::vector<T> v(static_cast<size_t>(W));
  for (int64_t l = 0; l < W; ++l)
    v[size_t(l)] = (part[size_t(l)] + part[size_t(2 * W + l)]) + (part[size_t(W + l)] + part[size_t(3 * W + l)]);
  for (int64_t w = W / 2; w >= 1; w /= 2)
    for (int64_t l = 0; l < w; ++l) v[size_t(l)] += v[size_t(l + w)];
  return v[0];
}

template <class T>
void expect_row_sums_in_their_order() {
  constexpr int64_t W = 64 / int64_t(sizeof(T));
  Rng rng(41);
  for (const int64_t n : {1, 5, 8, 9, 15, 16, 17, 24, 40, 63, 64, 65, 100, 127, 128, 129, 200, 255, 256, 257, 513}) {
    SCOPED_TRACE(testing::Message() << n << " elements of " << sizeof(T) << " bytes");
    std::vector<T> x(size_t(n + 2 * W), std::numeric_limits<T>::quiet_NaN()), y = x;
    for (int64_t c = 0; c < n; ++c) {
      x[size_t(c)] = T(rng.normal() * std::ldexp(1.0, int(c % 7) - 3));
      y[size_t(c)] = T(rng.normal());
    }
    const T want = sum_in_the_stated_order(x, n), want_y = sum_in_the_stated_order(y, n);
    const auto same = [](T got, T w) { return std::memcmp(&got, &w, sizeof(T)) == 0; };
    T one[1], two[2];
    row_sums_portable<1>(n, one, [&](int64_t c, int) { return x[size_t(c)]; });
    row_sums_portable<2>(n, two, [&](int64_t c, int k) { return k == 0 ? x[size_t(c)] : y[size_t(c)]; });
    EXPECT_TRUE(same(one[0], want)) << "portable: " << one[0] << " against " << want;
    EXPECT_TRUE(same(two[0], want) && same(two[1], want_y)) << "portable, two sums: " << two[0] << ", " << two[1];
    EXPECT_TRUE(same(row_sum(x.data(), n), want)) << "row_sum: " << row_sum(x.data(), n) << " against " << want;
#if defined(GMLP_ROW_SUM_SIMD)
    if constexpr (std::is_same_v<T, float>) {
      float pair[2];
      row_sums_simd<2>(n, pair, [&](int64_t c, SimdLanes::Mask m) {
        return TermPair{SimdLanes::load(m, x.data() + c), SimdLanes::load(m, y.data() + c)};
      });
      EXPECT_TRUE(same(pair[0], want) && same(pair[1], want_y)) << "vector, two sums: " << pair[0] << ", " << pair[1];
    }
#endif
    double exact = 0, magnitude = 0;
    for (int64_t c = 0; c < n; ++c) exact += double(x[size_t(c)]), magnitude += std::abs(double(x[size_t(c)]));
    const double u = std::ldexp(1.0, -std::numeric_limits<T>::digits);
    EXPECT_LE(std::abs(double(want) - exact), double(n) * u / (1 - double(n) * u) * magnitude);
  }
}

TEST(RowSums, AddInTheirStatedOrder) {
  expect_row_sums_in_their_order<float>();
  expect_row_sums_in_their_order<double>();
}

TEST(FastVsRef, Gelu) {
  const int64_t n = 1001;
  Rng rng(12);
  auto x = randn<float>(n, rng, 3.0), dy = randn<float>(n, rng);
  std::vector<float> y1(n), y2(n), dx1(n, 0.f), dx2(n, 0.f);
  gelu_forward(y1.data(), x.data(), n);
  gelu_forward_ref(y2.data(), x.data(), n);
  EXPECT_TRUE(close("y", y1, y2, tol::kFastVsRef));
  gelu_backward(dx1.data(), dy.data(), x.data(), n);
  gelu_backward_ref(dx2.data(), dy.data(), x.data(), n);
  EXPECT_TRUE(close("dx", dx1, dx2, tol::kFastVsRef));
}

// A gate's random inputs for shape s, drawn from rng in this order: z (M × F), γ and β (H), W
// (N × N, scale 0.15), b (N), dout and res (M × H).
struct GateInputs {
  std::vector<float> z, gamma, beta, W, b, dout, res;
  GateInputs(const SguShape& s, Rng& rng)
      : z(randn<float>(s.rows() * s.F, rng)),
        gamma(randn<float>(s.H(), rng)),
        beta(randn<float>(s.H(), rng)),
        W(randn<float>(s.N * s.N, rng, 0.15)),
        b(randn<float>(s.N, rng)),
        dout(randn<float>(s.rows() * s.H(), rng)),
        res(randn<float>(s.rows() * s.H(), rng)) {}
};

// Every gate with aMLP's residual input, on one image and on six, two threads; on six, each
// image's last 7 + b tokens are padding.
TEST(FastVsRef, Sgu) {
  const test::WithThreads two(2);
  for (const char* gate : {"split", "multiplicative", "additive", "linear"})
    for (const int64_t B : {1, 6}) {
      SCOPED_TRACE(std::string(gate) + " B=" + std::to_string(B));
      std::vector<uint8_t> pad(size_t(B) * 49, 0);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t n = 49 - 7 - b; n < 49; ++n) pad[size_t(b * 49 + n)] = 1;
      const SguShape s{49, B, 38, parse_sgu_gate(gate), B > 1 ? pad.data() : nullptr};
      const int64_t M = s.rows(), H = s.H(), N = s.N;
      Rng rng(13);
      const GateInputs in(s, rng);
      const auto& [z, gamma, beta, W, b, dout, res] = in;
      std::vector<float> out1(M * H), out2(M * H), mean(M), rstd(M), g(M * H);
      sgu_forward(out1.data(), mean.data(), rstd.data(), g.data(), z.data(), gamma.data(), beta.data(), W.data(),
                  b.data(), s, 1e-5f, res.data());
      sgu_forward_ref(out2.data(), z.data(), gamma.data(), beta.data(), W.data(), b.data(), s, 1e-5f, res.data());
      EXPECT_TRUE(close("out", out1, out2, tol::kFastVsRef));
      // Inference saves nothing: the same arithmetic in per-thread tiles, so the same bits.
      std::vector<float> out3(M * H);
      sgu_forward<float>(out3.data(), nullptr, nullptr, nullptr, z.data(), gamma.data(), beta.data(), W.data(),
                         b.data(), s, 1e-5f, res.data());
      EXPECT_EQ(out1, out3);
      std::vector<float> dz1(M * s.F, std::nanf("")), dgm1(H, 0.f), dbt1(H, 0.f), dW1(N * N, 0.f), db1(N, 0.f);
      std::vector<float> dres1(M * H, std::nanf(""));
      auto dz2 = dz1, dgm2 = dgm1, dbt2 = dbt1, dW2 = dW1, db2 = db1, dres2 = dres1;
      sgu_backward(dz1.data(), dgm1.data(), dbt1.data(), dW1.data(), db1.data(), dout.data(), z.data(), mean.data(),
                   rstd.data(), g.data(), gamma.data(), beta.data(), W.data(), s, dres1.data());
      sgu_backward_ref(dz2.data(), dgm2.data(), dbt2.data(), dW2.data(), db2.data(), dout.data(), z.data(),
                       gamma.data(), beta.data(), W.data(), b.data(), s, 1e-5f, res.data(), dres2.data());
      EXPECT_TRUE(close("dz", dz1, dz2, tol::kFastVsRef));
      EXPECT_TRUE(close("dres", dres1, dres2, tol::kFastVsRef));
      EXPECT_TRUE(close("dgamma", dgm1, dgm2, tol::kFastVsRef, 30.0));  // sums over N·B rows
      EXPECT_TRUE(close("dbeta", dbt1, dbt2, tol::kFastVsRef, 30.0));
      EXPECT_TRUE(close("dW", dW1, dW2, tol::kFastVsRef, 30.0));
      EXPECT_TRUE(close("db", db1, db2, tol::kFastVsRef, 30.0));
    }
}

// The gate packs W once a call (ConstantForCall), not once an image, and keeps the pack for the
// next call: a W changed in place between calls (an optimizer step) is packed again, giving the
// bits of a W met for the first time, in the pack's own buffer. f32, and bf16 where it runs.
TEST(FastVsRef, SguPacksWOnceACallAndAgainAfterItChanges) {
  const test::WithThreads two(2);
  const SguShape s{49, 6, 38, SguGate::split};
  const int64_t M = s.rows(), H = s.H(), N = s.N;
  Rng rng(21);
  GateInputs in(s, rng);
  const std::vector<float> W2 = randn<float>(N * N, rng, 0.15);
  std::vector<Precision> precisions{Precision::f32};
  if (gemm::bf16_available()) precisions.push_back(Precision::bf16);
  for (const Precision p : precisions) {
    SCOPED_TRACE(precision_name(p));
    set_matmul_precision(p);
    // Forward and backward at W, its output and input gradient as bits.
    auto run = [&](const float* W) {
      std::vector<float> out(M * H), mean(M), rstd(M), g(M * H), dz(M * s.F), dgm(H, 0.f), dbt(H, 0.f), dW(N * N, 0.f),
          db(N, 0.f);
      sgu_forward(out.data(), mean.data(), rstd.data(), g.data(), in.z.data(), in.gamma.data(), in.beta.data(), W,
                  in.b.data(), s, 1e-5f);
      sgu_backward(dz.data(), dgm.data(), dbt.data(), dW.data(), db.data(), in.dout.data(), in.z.data(), mean.data(),
                   rstd.data(), g.data(), in.gamma.data(), in.beta.data(), W, s);
      out.insert(out.end(), dz.begin(), dz.end());
      return out;
    };
    std::vector<float> W = in.W;
    const std::vector<float> first = run(W.data());
    const size_t kept = constant_pack_bytes();
    EXPECT_GT(kept, 0u) << "the call kept its packs of W for the next";
    EXPECT_EQ(run(W.data()), first);
    std::copy(W2.begin(), W2.end(), W.begin());  // a step of the optimizer
    const std::vector<float> fresh = run(W2.data());
    const size_t with_fresh = constant_pack_bytes();
    EXPECT_EQ(run(W.data()), fresh) << "the pack of the old W was used";
    EXPECT_EQ(constant_pack_bytes(), with_fresh) << "the new W was packed into the old pack's buffer";
    EXPECT_NE(fresh, first);
    // Frozen afterwards (an inference process's model): the call's own range gives way to it.
    hold_constant(W.data(), W.data() + W.size());
    EXPECT_EQ(run(W.data()), fresh);
    release_constant(W.data());
    drop_packs(W.data(), W.data() + W.size());
    drop_packs(W2.data(), W2.data() + W2.size());
  }
  set_matmul_precision(Precision::f32);
}

// At batch 1 the threads split the image's channels (sgu_forward): two threads give one thread's
// bits, for every gate, with aMLP's residual and a padding token, in training (statistics and g
// saved, g as floats and as bf16) and in inference (nothing saved, the output as floats and as
// bf16). 200 channels: 3 units of 32 on the first thread, the rest (uneven) on the second.
TEST(FastVsRef, SguAtBatchOneSplitsChannelsWithTheBitsOfOneThread) {
  const bool bf16 = gemm::bf16_available();
  for (const char* gate : {"split", "multiplicative", "additive", "linear"}) {
    SCOPED_TRACE(gate);
    std::vector<uint8_t> pad(49, 0);
    pad[40] = 1;
    const SguShape s{49, 1, 200, parse_sgu_gate(gate), pad.data()};
    const int64_t M = s.rows(), H = s.H();
    Rng rng(16);
    const GateInputs in(s, rng);
    // References, not a structured binding: clang 14 cannot capture one in a lambda.
    const std::vector<float>&z = in.z, &gamma = in.gamma, &beta = in.beta, &W = in.W, &b = in.b, &res = in.res;
    for (const SguBf16 kind : {SguBf16{false, false}, SguBf16{bf16, bf16}})
      for (const bool save : {true, false}) {
        SCOPED_TRACE(std::string(save ? "training" : "inference") + (kind.stored ? ", bf16" : ""));
        auto run = [&](int threads) {
          const test::WithThreads with(threads);
          std::vector<float> out(M * H, std::nanf("")), mean(M), rstd(M), g(M * H, std::nanf(""));
          sgu_forward(out.data(), save ? mean.data() : nullptr, save ? rstd.data() : nullptr, save ? g.data() : nullptr,
                      z.data(), gamma.data(), beta.data(), W.data(), b.data(), s, 1e-5f, res.data(),
                      SguBf16{kind.stored, kind.g && save});
          std::vector<uint32_t> bits;  // NaN-proof: compare the floats' bits
          for (const auto* v : {&out, &mean, &rstd, &g})
            for (const float x : *v) bits.push_back(std::bit_cast<uint32_t>(x));
          return bits;
        };
        EXPECT_EQ(run(1), run(2));
      }
  }
}

// Calls f(s) for every gate, at batch 1 and at batch 6 with a padding token in each image (and
// aMLP's residual where the test passes it), on 1 and 2 threads: the cases each of the gate's
// fused paths is held to.
template <class F>
void for_each_gate_case(const F& f) {
  const int saved = num_threads();
  for (const char* gate : {"split", "multiplicative", "additive", "linear"})
    for (const int64_t B : {1, 6})
      for (const int threads : {1, 2}) {
        SCOPED_TRACE(std::string(gate) + " B=" + std::to_string(B) + " threads=" + std::to_string(threads));
        set_threads(threads);
        std::vector<uint8_t> pad(size_t(B) * 49, 0);
        for (int64_t b = 0; b < B; ++b) pad[size_t(b * 49 + 40)] = 1;
        f(SguShape{49, B, 38, parse_sgu_gate(gate), B > 1 ? pad.data() : nullptr});
      }
  set_threads(saved);
}

// GELU's backward inside the gate's (SguGelu, the gating MLP's): each row of dz as the gate's
// backward and then gelu_backward_by_slope's own pass make it, bit for bit, with the slope as
// floats and as bf16, dz as floats and stored as bf16, for every gate, with aMLP's residual and
// padding, on 1 and 2 threads. fc1's bias gradient sums the rows image by image instead of in
// blocks of rows, so it matches to rounding.
TEST(FastVsRef, SguWithGeluIsTheGatesBackwardThenGelus) {
  for_each_gate_case([&](const SguShape& s) {
    const int64_t M = s.rows(), H = s.H(), N = s.N, F = s.F, B = s.B;
    Rng rng(14);
    const GateInputs in(s, rng);
    // References, not a structured binding: clang 14 cannot capture one in a lambda.
    const std::vector<float>&z = in.z, &gamma = in.gamma, &beta = in.beta, &W = in.W, &b = in.b, &dout = in.dout,
          &res = in.res;
    const auto pre = randn<float>(M * F, rng);
    std::vector<float> out(M * H), mean(M), rstd(M), g(M * H), a(M * F), slope(M * F);
    std::vector<float> slope16((M * F + 1) / 2);
    gelu_forward_serial(a.data(), pre.data(), M * F, slope.data());
    if (gemm::bf16_available()) gelu_forward_serial(a.data(), pre.data(), M * F, slope16.data(), true);
    sgu_forward(out.data(), mean.data(), rstd.data(), g.data(), z.data(), gamma.data(), beta.data(), W.data(), b.data(),
                s, 1e-5f, B > 1 ? res.data() : nullptr);
    for (const bool bf16 : {false, true}) {
      if (bf16 && !gemm::bf16_available()) continue;
      SCOPED_TRACE(bf16 ? "slope and dz as bf16" : "floats");
      const float* sl = bf16 ? slope16.data() : slope.data();
      auto run = [&](bool fused, std::vector<float>& dz, std::vector<uint16_t>& dz16, std::vector<float>& dbias,
                     std::vector<float>& dW) {
        dz.assign(size_t(M * F), std::nanf("")), dz16.assign(size_t(M * F), 0), dbias.assign(size_t(F), 0.5f);
        dW.assign(size_t(N * N), 0.f);
        std::vector<float> dgm(H, 0.f), dbt(H, 0.f), db(N, 0.f), dres(M * H);
        const SguGelu<float> act{sl, bf16, dbias.data(), bf16 ? dz16.data() : nullptr};
        sgu_backward(dz.data(), dgm.data(), dbt.data(), dW.data(), db.data(), dout.data(), z.data(), mean.data(),
                     rstd.data(), g.data(), gamma.data(), beta.data(), W.data(), s, B > 1 ? dres.data() : nullptr,
                     SguBf16{}, fused ? &act : nullptr);
        if (!fused) gelu_backward_by_slope(dz.data(), sl, M, F, dbias.data(), bf16 ? dz16.data() : nullptr, bf16);
      };
      std::vector<float> dz1, dz2, db1, db2, dW1, dW2;
      std::vector<uint16_t> h1, h2;
      run(false, dz1, h1, db1, dW1);
      run(true, dz2, h2, db2, dW2);
      if (bf16)
        EXPECT_EQ(h1, h2) << "dz stored as bf16";
      else
        EXPECT_EQ(dz1, dz2);
      EXPECT_EQ(dW1, dW2);
      EXPECT_TRUE(close("fc1's bias gradient", db2, db1, tol::kFastVsRef, 30.0));  // sums over N·B rows
    }
  });
}

// The gate on fc1's output before GELU (SguShape::gelu, training's gating MLP): GELU applied to
// each row as the gate reads it, and in backward GELU's slope made again from the row, give the
// bits of the gate on GELU's output with the slope fc1's epilogue saves (floats), forward and
// backward (dz and fc1's bias gradient, stored as bf16 too where it runs), for every gate, with
// aMLP's residual and padding, on 1 and 2 threads; both passes match the reference, which
// applies GELU and its backward around the plain gate's; and z stored as bf16 gives the bits of
// its values as floats.
TEST(FastVsRef, SguOnThePreActivationIsTheGateOnGelusOutput) {
  for_each_gate_case([&](const SguShape& plain) {
    SguShape s = plain;
    s.gelu = true;
    const int64_t M = s.rows(), H = s.H(), N = s.N, F = s.F, B = s.B;
    Rng rng(15);
    const GateInputs in(s, rng);
    const std::vector<float>&pre = in.z, &gamma = in.gamma, &beta = in.beta, &W = in.W, &b = in.b, &dout = in.dout,
          &res = in.res;
    const float* r = B > 1 ? res.data() : nullptr;
    std::vector<float> a(M * F), slope(M * F);
    gelu_forward_serial(a.data(), pre.data(), M * F, slope.data());
    std::vector<float> out1(M * H), out2(M * H), out3(M * H), mean1(M), mean2(M), rstd1(M), rstd2(M), g1(M * H),
        g2(M * H);
    sgu_forward(out1.data(), mean1.data(), rstd1.data(), g1.data(), a.data(), gamma.data(), beta.data(), W.data(),
                b.data(), plain, 1e-5f, r);
    sgu_forward(out2.data(), mean2.data(), rstd2.data(), g2.data(), pre.data(), gamma.data(), beta.data(), W.data(),
                b.data(), s, 1e-5f, r);
    EXPECT_EQ(out1, out2);
    EXPECT_EQ(mean1, mean2);
    EXPECT_EQ(rstd1, rstd2);
    EXPECT_EQ(g1, g2);
    sgu_forward_ref(out3.data(), pre.data(), gamma.data(), beta.data(), W.data(), b.data(), s, 1e-5f, r);
    EXPECT_TRUE(close("out against the reference", out2, out3, tol::kFastVsRef));
    for (const bool bf16 : {false, true}) {
      if (bf16 && !gemm::bf16_available()) continue;
      SCOPED_TRACE(bf16 ? "dz stored as bf16" : "floats");
      auto run = [&](bool again, std::vector<float>& dz, std::vector<uint16_t>& dz16, std::vector<float>& dbias,
                     std::vector<float>& dW) {
        dz.assign(size_t(M * F), std::nanf("")), dz16.assign(size_t(M * F), 0), dbias.assign(size_t(F), 0.5f);
        dW.assign(size_t(N * N), 0.f);
        std::vector<float> dgm(H, 0.f), dbt(H, 0.f), db(N, 0.f), dres(M * H);
        const SguGelu<float> act{again ? nullptr : slope.data(), false, dbias.data(), bf16 ? dz16.data() : nullptr};
        sgu_backward(dz.data(), dgm.data(), dbt.data(), dW.data(), db.data(), dout.data(),
                     again ? pre.data() : a.data(), mean1.data(), rstd1.data(), g1.data(), gamma.data(), beta.data(),
                     W.data(), again ? s : plain, B > 1 ? dres.data() : nullptr, SguBf16{}, &act);
      };
      std::vector<float> dz1, dz2, db1, db2, dW1, dW2;
      std::vector<uint16_t> h1, h2;
      run(false, dz1, h1, db1, dW1);
      run(true, dz2, h2, db2, dW2);
      if (bf16) {
        EXPECT_EQ(h1, h2);
        continue;
      }
      EXPECT_EQ(dz1, dz2);
      EXPECT_EQ(dW1, dW2);
      EXPECT_EQ(db1, db2);
      std::vector<float> dz3(M * F), dgm3(H, 0.f), dbt3(H, 0.f), dW3(N * N, 0.f), db3(N, 0.f), dres3(M * H);
      sgu_backward_ref(dz3.data(), dgm3.data(), dbt3.data(), dW3.data(), db3.data(), dout.data(), pre.data(),
                       gamma.data(), beta.data(), W.data(), b.data(), s, 1e-5f, r, B > 1 ? dres3.data() : nullptr);
      EXPECT_TRUE(close("dz against the reference", dz2, dz3, tol::kFastVsRef));
      EXPECT_TRUE(close("dW against the reference", dW2, dW3, tol::kFastVsRef, 30.0));  // sums over N·B rows
    }
    // Stored as bf16 (SguBf16::z, bf16 precision): the bits of the same values as floats.
    std::vector<float> rounded(M * F), stored16((M * F + 1) / 2);
    store_bf16(stored16.data(), pre.data(), M * F);
    for (int64_t i = 0; i < M * F; ++i)
      rounded[size_t(i)] = bf16_to_float(reinterpret_cast<uint16_t*>(stored16.data())[i]);
    std::vector<float> o1(M * H), o2(M * H), m1(M), m2(M), r1(M), r2(M), gg1(M * H), gg2(M * H);
    sgu_forward(o1.data(), m1.data(), r1.data(), gg1.data(), rounded.data(), gamma.data(), beta.data(), W.data(),
                b.data(), s, 1e-5f, r);
    sgu_forward(o2.data(), m2.data(), r2.data(), gg2.data(), stored16.data(), gamma.data(), beta.data(), W.data(),
                b.data(), s, 1e-5f, r, SguBf16{false, false, true});
    EXPECT_EQ(o1, o2);
    EXPECT_EQ(gg1, gg2);
    std::vector<float> dzs[2], dbs[2], dWs[2];
    for (const bool z16 : {false, true}) {
      dzs[z16].assign(size_t(M * F), 0.f), dbs[z16].assign(size_t(F), 0.5f), dWs[z16].assign(size_t(N * N), 0.f);
      std::vector<float> dgm(H, 0.f), dbt(H, 0.f), db(N, 0.f), dres(M * H);
      const SguGelu<float> act{nullptr, false, dbs[z16].data(), nullptr};
      sgu_backward(dzs[z16].data(), dgm.data(), dbt.data(), dWs[z16].data(), db.data(), dout.data(),
                   z16 ? stored16.data() : rounded.data(), m1.data(), r1.data(), gg1.data(), gamma.data(), beta.data(),
                   W.data(), s, B > 1 ? dres.data() : nullptr, SguBf16{false, false, z16}, &act);
    }
    EXPECT_EQ(dzs[0], dzs[1]);
    EXPECT_EQ(dWs[0], dWs[1]);
    EXPECT_EQ(dbs[0], dbs[1]);
  });
}

// The gate's g saved as bf16 (SguBf16::g, bf16 precision): the forward's output keeps its bits,
// the saved g is the float g rounded to nearest even, and backward gives the bits of a backward
// that reads those rounded values as floats; for every gate, with aMLP's residual and padding, on
// 1 and 2 threads (with the output stored as bf16 too where the CPU has AVX512-BF16).
TEST(FastVsRef, SguWithGSavedAsBf16ReadsTheRoundedG) {
  for_each_gate_case([&](const SguShape& s) {
    const int64_t M = s.rows(), H = s.H(), N = s.N, F = s.F, B = s.B;
    Rng rng(15);
    const GateInputs in(s, rng);
    // References, not a structured binding: clang 14 cannot capture one in a lambda.
    const std::vector<float>&z = in.z, &gamma = in.gamma, &beta = in.beta, &W = in.W, &b = in.b, &dout = in.dout,
          &res = in.res;
    const bool stored = gemm::bf16_available();
    const float* r = B > 1 ? res.data() : nullptr;
    std::vector<float> out1(M * H), out2(M * H), mean(M), rstd(M), g1(M * H), g2(M * H, std::nanf(""));
    sgu_forward(out1.data(), mean.data(), rstd.data(), g1.data(), z.data(), gamma.data(), beta.data(), W.data(),
                b.data(), s, 1e-5f, r, SguBf16{stored, false});
    sgu_forward(out2.data(), mean.data(), rstd.data(), g2.data(), z.data(), gamma.data(), beta.data(), W.data(),
                b.data(), s, 1e-5f, r, SguBf16{stored, true});
    EXPECT_EQ(out1, out2);
    std::vector<float> rounded(M * H);
    const auto* g16 = reinterpret_cast<const uint16_t*>(g2.data());
    for (int64_t i = 0; i < M * H; ++i) {
      ASSERT_EQ(g16[i], float_to_bf16(g1[i])) << "saved g, element " << i;
      rounded[i] = bf16_to_float(g16[i]);
    }
    auto run = [&](const std::vector<float>& g, bool g_bf16, std::vector<float>& dz, std::vector<float>& dW,
                   std::vector<float>& dres) {
      dz.assign(size_t(M * F), std::nanf("")), dW.assign(size_t(N * N), 0.f), dres.assign(size_t(M * H), 0.f);
      std::vector<float> dgm(H, 0.f), dbt(H, 0.f), db(N, 0.f);
      sgu_backward(dz.data(), dgm.data(), dbt.data(), dW.data(), db.data(), dout.data(), z.data(), mean.data(),
                   rstd.data(), g.data(), gamma.data(), beta.data(), W.data(), s, r ? dres.data() : nullptr,
                   SguBf16{stored, g_bf16});
    };
    std::vector<float> dz1, dz2, dW1, dW2, dres1, dres2;
    run(rounded, false, dz1, dW1, dres1);
    run(g2, true, dz2, dW2, dres2);
    EXPECT_EQ(dz1, dz2);
    EXPECT_EQ(dW1, dW2);
    EXPECT_EQ(dres1, dres2);
  });
}

// GELU's backward fused into the product of the next layer's input gradient: the unfused
// gradient through gelu_backward_inplace, bit for bit, on 1 and 2 threads.
TEST(FastVsRef, LinearBackwardWithFusedGeluIsTheUnfusedBitForBit) {
  const int64_t M = 301, in = 133, out = 300;
  Rng rng(12);
  auto pre = randn<float>(M * in, rng), W = randn<float>(out * in, rng, 0.1), dy = randn<float>(M * out, rng);
  std::vector<float> x(M * in), slope(M * in);
  gelu_forward_serial(x.data(), pre.data(), M * in, slope.data());
  const int threads = omp_get_max_threads();
  for (const int t : {1, 2}) {
    omp_set_num_threads(t);
    std::vector<float> dx1(M * in), dW1(out * in, 0.f), db1(out, 0.f);
    auto dx2 = dx1, dW2 = dW1, db2 = db1;
    linear_backward(dx1.data(), dW1.data(), db1.data(), dy.data(), x.data(), W.data(), M, in, out, Write::overwrite);
    gelu_backward_inplace(dx1.data(), pre.data(), M * in);
    linear_backward(dx2.data(), dW2.data(), db2.data(), dy.data(), x.data(), W.data(), M, in, out, Write::overwrite,
                    Activation::gelu, slope.data());
    omp_set_num_threads(threads);
    EXPECT_EQ(0, std::memcmp(dx1.data(), dx2.data(), dx1.size() * sizeof(float))) << t << " threads";
    EXPECT_EQ(dW1, dW2);
    EXPECT_EQ(db1, db2);
  }
}

}  // namespace
}  // namespace gmlp
