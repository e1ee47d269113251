// The ops the models compose beyond the layers of tests/test_ops.cpp: add_relu (the CNN block
// output); affine (ResMLP), layer_scale; row_bias, column_layernorm (feed-forward-only),
// column_softmax and sum_normalize (external attention); embedding and rel_bias (the text models).
// Each backward against central finite differences in double (loss Σ r ⊙ f(inputs), random r),
// parameter gradients starting non-zero (they accumulate) and activation gradients NaN-filled
// (they are overwritten), the in-place calls the models make, and every fast float op against its
// plain _ref twin on ragged shapes; where the fast backward promises the same bits for any thread
// count, 1 and 2 threads are compared exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "check.h"
#include "core/threads.h"
#include "nn/text_model.h"
#include "ops/add_relu.h"
#include "ops/affine.h"
#include "ops/column_layernorm.h"
#include "ops/column_softmax.h"
#include "ops/embedding.h"
#include "ops/layer_scale.h"
#include "ops/rel_bias.h"
#include "ops/row_bias.h"
#include "ops/sum_normalize.h"
#include "tolerances.h"

namespace gmlp {
namespace {

using test::close;
using test::dot;
using test::expect_fd;
using test::randn;
using Vec = std::vector<double>;

// ---------------------------------------------------------------------------------------------
// add_relu: the CNN block's output. Inputs kept off the kink (|a + b| ≥ 0.01) so that central
// differences see one side of it.
TEST(AddRelu, GradientsMatchFiniteDifferences) {
  const int64_t n = 40;
  Rng rng(301);
  Vec a = randn<double>(n, rng), b = randn<double>(n, rng), r = randn<double>(n, rng), out(n);
  for (int64_t i = 0; i < n; ++i)
    if (std::abs(a[i] + b[i]) < 0.01) a[i] += 0.02;
  auto loss = [&] {
    add_relu_forward(out.data(), a.data(), b.data(), n);
    return dot(r, out);
  };
  loss();
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(out[i], std::max(a[i] + b[i], 0.0));
  Vec dsum(n, std::nan(""));  // overwritten: NaN must not leak
  add_relu_backward(dsum.data(), r.data(), out.data(), n);
  expect_fd("da", a, dsum, loss);
  expect_fd("db", b, dsum, loss);
  // In place, as the CNN calls it: the output over an input, the gradient over dout.
  loss();
  Vec inplace = a, d = r;
  add_relu_forward(inplace.data(), inplace.data(), b.data(), n);
  EXPECT_EQ(inplace, out);
  add_relu_backward(d.data(), d.data(), out.data(), n);
  EXPECT_EQ(d, dsum);
  double nan = std::nan(""), zero = 0, y;
  add_relu_forward(&y, &nan, &zero, 1);
  EXPECT_TRUE(std::isnan(y));  // as torch.relu: a diverged activation stays visible
}

TEST(FastVsRef, AddRelu) {
  const test::WithThreads two(2);
  const int64_t n = 1001;
  Rng rng(302);
  auto a = randn<float>(n, rng), b = randn<float>(n, rng), dout = randn<float>(n, rng);
  std::vector<float> o1(n), o2(n), d1(n, std::nanf("")), d2(n, std::nanf(""));
  add_relu_forward(o1.data(), a.data(), b.data(), n);
  add_relu_forward_ref(o2.data(), a.data(), b.data(), n);
  EXPECT_EQ(o1, o2);  // one rounding each: the same bits
  add_relu_backward(d1.data(), dout.data(), o1.data(), n);
  add_relu_backward_ref(d2.data(), dout.data(), o2.data(), n);
  EXPECT_EQ(d1, d2);
}

// ---------------------------------------------------------------------------------------------
// affine: ResMLP's norm. Gradients start non-zero: backward must add to them.
TEST(Affine, GradientsMatchFiniteDifferences) {
  const int64_t M = 7, D = 5;  // M = N·B rows
  Rng rng(311);
  Vec x = randn<double>(M * D, rng), alpha = randn<double>(D, rng), beta = randn<double>(D, rng);
  Vec r = randn<double>(M * D, rng), y(M * D);
  auto loss = [&] {
    affine_forward(y.data(), x.data(), alpha.data(), beta.data(), M, D);
    return dot(r, y);
  };
  Vec dx0 = randn<double>(M * D, rng), da0 = randn<double>(D, rng), db0 = randn<double>(D, rng);
  Vec dx = dx0, da = da0, db = db0;
  affine_backward(dx.data(), da.data(), db.data(), r.data(), x.data(), alpha.data(), M, D);
  expect_fd("dx", x, dx, dx0, loss);
  expect_fd("dalpha", alpha, da, da0, loss);
  expect_fd("dbeta", beta, db, db0, loss);
}

// Ragged (no multiple of a SIMD width or of the 16-float block) and more rows than a block.
TEST(FastVsRef, Affine) {
  const int64_t M = 97, D = 75;
  Rng rng(312);
  auto x = randn<float>(M * D, rng), alpha = randn<float>(D, rng), beta = randn<float>(D, rng);
  auto dy = randn<float>(M * D, rng);
  std::vector<float> y1(M * D), y2(M * D);
  affine_forward(y1.data(), x.data(), alpha.data(), beta.data(), M, D);
  affine_forward_ref(y2.data(), x.data(), alpha.data(), beta.data(), M, D);
  EXPECT_TRUE(close("y", y1, y2, tol::kFastVsRef));
  std::vector<float> dx[2], da[2], db[2];
  for (const int threads : {1, 2}) {  // the parameter gradients' sums: the same bits either way
    const test::WithThreads with(threads);
    dx[threads - 1].assign(M * D, 0.5f), da[threads - 1].assign(D, 0.5f), db[threads - 1].assign(D, 0.5f);
    affine_backward(dx[threads - 1].data(), da[threads - 1].data(), db[threads - 1].data(), dy.data(), x.data(),
                    alpha.data(), M, D);
  }
  EXPECT_EQ(dx[0], dx[1]);
  EXPECT_EQ(da[0], da[1]);
  EXPECT_EQ(db[0], db[1]);
  std::vector<float> dx2(M * D, 0.5f), da2(D, 0.5f), db2(D, 0.5f);
  affine_backward_ref(dx2.data(), da2.data(), db2.data(), dy.data(), x.data(), alpha.data(), M, D);
  EXPECT_TRUE(close("dx", dx[1], dx2, tol::kFastVsRef));
  EXPECT_TRUE(close("dalpha", da[1], da2, tol::kFastVsRef, 10.0));  // sums of 97 O(1) terms
  EXPECT_TRUE(close("dbeta", db[1], db2, tol::kFastVsRef, 10.0));
}

// layer_scale: with stochastic depth (samples dropped and kept at 1/(1-p)) and without.
TEST(LayerScale, GradientsMatchFiniteDifferences) {
  const int64_t N = 3, B = 4, D = 5;
  Rng rng(313);
  for (const bool drop : {false, true}) {
    SCOPED_TRACE(drop ? "drop path" : "no drop path");
    Vec x = randn<double>(N * B * D, rng), y = randn<double>(N * B * D, rng);
    Vec gamma = randn<double>(D, rng), keep = {0.0, 1.25, 1.25, 0.0};
    Vec r = randn<double>(N * B * D, rng), out(N * B * D);
    const double* k = drop ? keep.data() : nullptr;
    auto loss = [&] {
      layer_scale_forward(out.data(), x.data(), y.data(), k, gamma.data(), N, B, D);
      return dot(r, out);
    };
    Vec dy(N * B * D, std::nan("")), dg0 = randn<double>(D, rng), dg = dg0;
    layer_scale_backward(dy.data(), dg.data(), r.data(), y.data(), k, gamma.data(), N, B, D);
    expect_fd("dy", y, dy, loss);
    expect_fd("dgamma", gamma, dg, dg0, loss);
    expect_fd("dx_in", x, r, loss);  // the identity the caller applies
    // In place: dy over dx_out.
    Vec d = r, dg2 = dg0;
    layer_scale_backward(d.data(), dg2.data(), d.data(), y.data(), k, gamma.data(), N, B, D);
    EXPECT_EQ(d, dy);
    EXPECT_EQ(dg2, dg);
  }
}

TEST(FastVsRef, LayerScale) {
  const int64_t N = 13, B = 6, D = 75;
  Rng rng(314);
  auto x = randn<float>(N * B * D, rng), y = randn<float>(N * B * D, rng);
  auto gamma = randn<float>(D, rng), dout = randn<float>(N * B * D, rng);
  const std::vector<float> keep = {0.f, 1.25f, 1.25f, 1.25f, 0.f, 1.25f};
  for (const float* k : {static_cast<const float*>(nullptr), keep.data()}) {
    SCOPED_TRACE(k ? "drop path" : "no drop path");
    std::vector<float> o1(N * B * D), o2(N * B * D);
    layer_scale_forward(o1.data(), x.data(), y.data(), k, gamma.data(), N, B, D);
    layer_scale_forward_ref(o2.data(), x.data(), y.data(), k, gamma.data(), N, B, D);
    EXPECT_TRUE(close("x_out", o1, o2, tol::kFastVsRef));
    std::vector<float> dy[2], dg[2];
    for (const int threads : {1, 2}) {
      const test::WithThreads with(threads);
      dy[threads - 1].assign(N * B * D, std::nanf("")), dg[threads - 1].assign(D, 0.5f);
      layer_scale_backward(dy[threads - 1].data(), dg[threads - 1].data(), dout.data(), y.data(), k, gamma.data(), N, B,
                           D);
    }
    EXPECT_EQ(dy[0], dy[1]);
    EXPECT_EQ(dg[0], dg[1]);
    std::vector<float> dy2(N * B * D, std::nanf("")), dg2(D, 0.5f);
    layer_scale_backward_ref(dy2.data(), dg2.data(), dout.data(), y.data(), k, gamma.data(), N, B, D);
    EXPECT_TRUE(close("dy", dy[1], dy2, tol::kFastVsRef));
    EXPECT_TRUE(close("dgamma", dg[1], dg2, tol::kFastVsRef, 10.0));  // sums of 78 terms
  }
}

// ---------------------------------------------------------------------------------------------
// row_bias: the token-mixing layers' bias per output token.
TEST(RowBias, GradientMatchesFiniteDifferences) {
  const int64_t N = 4, cols = 7;  // cols = B·D
  Rng rng(321);
  Vec y0 = randn<double>(N * cols, rng), b = randn<double>(N, rng), r = randn<double>(N * cols, rng);
  Vec y(N * cols);
  auto loss = [&] {
    y = y0;
    row_bias_forward_ref(y.data(), b.data(), N, cols);
    return dot(r, y);
  };
  loss();
  EXPECT_EQ(y[2 * cols + 3], y0[2 * cols + 3] + b[2]);
  Vec db0 = randn<double>(N, rng), db = db0;
  row_bias_backward(db.data(), r.data(), N, cols);
  expect_fd("db", b, db, db0, loss);
}

TEST(FastVsRef, RowBias) {
  const int64_t N = 49, cols = 1037;
  Rng rng(322);
  auto dy = randn<float>(N * cols, rng);
  std::vector<float> db1(N, 0.5f), db2(N, 0.5f);
  row_bias_backward(db1.data(), dy.data(), N, cols);
  row_bias_backward_ref(db2.data(), dy.data(), N, cols);
  EXPECT_TRUE(close("db", db1, db2, tol::kFastVsRef, std::sqrt(double(cols))));  // ~√cols in size
}

// column_layernorm: the feed-forward-only model's LayerNorm over tokens. Columns with offsets
// and scales of their own, so the per-column statistics matter.
TEST(ColumnLayerNorm, GradientsMatchFiniteDifferences) {
  const int64_t N = 5, cols = 6;
  Rng rng(323);
  Vec x = randn<double>(N * cols, rng, 2.0), gamma = randn<double>(N, rng), beta = randn<double>(N, rng);
  for (int64_t i = 0; i < N * cols; ++i) x[i] += double(i % cols) - 2.0;
  Vec r = randn<double>(N * cols, rng), y(N * cols), mean(cols), rstd(cols);
  auto loss = [&] {
    column_layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(), beta.data(), N, cols, 1e-6);
    return dot(r, y);
  };
  loss();
  Vec dx(N * cols, std::nan("")), dg0 = randn<double>(N, rng), db0 = randn<double>(N, rng);
  Vec dg = dg0, db = db0;
  column_layernorm_backward(dx.data(), dg.data(), db.data(), r.data(), x.data(), mean.data(), rstd.data(), gamma.data(),
                            N, cols);
  expect_fd("dx", x, dx, loss);
  expect_fd("dgamma", gamma, dg, dg0, loss);
  expect_fd("dbeta", beta, db, db0, loss);
  // The reference twin, from the same saved statistics.
  loss();
  Vec dxr(N * cols, std::nan("")), dgr = dg0, dbr = db0;
  column_layernorm_backward_ref(dxr.data(), dgr.data(), dbr.data(), r.data(), x.data(), mean.data(), rstd.data(),
                                gamma.data(), N, cols);
  expect_fd("dx (ref)", x, dxr, loss);
  expect_fd("dgamma (ref)", gamma, dgr, dg0, loss);
  expect_fd("dbeta (ref)", beta, dbr, db0, loss);
}

// More columns than two 256-column chunks, the last one ragged.
TEST(FastVsRef, ColumnLayerNorm) {
  const test::WithThreads two(2);
  const int64_t N = 13, cols = 549;
  Rng rng(324);
  auto x = randn<float>(N * cols, rng, 3.0), gamma = randn<float>(N, rng), beta = randn<float>(N, rng);
  auto dy = randn<float>(N * cols, rng);
  std::vector<float> y1(N * cols), y2(N * cols), m1(cols), m2(cols), r1(cols), r2(cols);
  column_layernorm_forward(y1.data(), m1.data(), r1.data(), x.data(), gamma.data(), beta.data(), N, cols, 1e-6f);
  column_layernorm_forward_ref(y2.data(), m2.data(), r2.data(), x.data(), gamma.data(), beta.data(), N, cols, 1e-6f);
  EXPECT_TRUE(close("y", y1, y2, tol::kFastVsRef));
  EXPECT_TRUE(close("mean", m1, m2, tol::kFastVsRef));
  EXPECT_TRUE(close("rstd", r1, r2, tol::kFastVsRef));
  std::vector<float> dx1(N * cols, std::nanf("")), dx2(N * cols, std::nanf(""));
  std::vector<float> dg1(N, 0.5f), db1(N, 0.5f), dg2(N, 0.5f), db2(N, 0.5f);
  column_layernorm_backward(dx1.data(), dg1.data(), db1.data(), dy.data(), x.data(), m1.data(), r1.data(), gamma.data(),
                            N, cols);
  column_layernorm_backward_ref(dx2.data(), dg2.data(), db2.data(), dy.data(), x.data(), m2.data(), r2.data(),
                                gamma.data(), N, cols);
  EXPECT_TRUE(close("dx", dx1, dx2, tol::kFastVsRef));
  // Sums of 549 O(1) terms, ~√549 in size.
  EXPECT_TRUE(close("dgamma", dg1, dg2, tol::kFastVsRef, std::sqrt(double(cols))));
  EXPECT_TRUE(close("dbeta", db1, db2, tol::kFastVsRef, std::sqrt(double(cols))));
}

// column_softmax: external attention's softmax over tokens. Scores of scale 3 so that the
// probabilities are far from uniform.
TEST(ColumnSoftmax, GradientMatchesFiniteDifferences) {
  const int64_t N = 5, cols = 7;
  Rng rng(325);
  Vec a = randn<double>(N * cols, rng, 3.0), r = randn<double>(N * cols, rng), p(N * cols);
  auto loss = [&] {
    column_softmax_forward(p.data(), a.data(), N, cols);
    return dot(r, p);
  };
  loss();
  for (int64_t c = 0; c < cols; ++c) {
    double s = 0;
    for (int64_t n = 0; n < N; ++n) s += p[n * cols + c];
    EXPECT_NEAR(s, 1.0, 1e-14) << "column " << c;
  }
  Vec da(N * cols, std::nan(""));
  column_softmax_backward(da.data(), r.data(), p.data(), N, cols);
  expect_fd("da", a, da, loss);
  // In place, as external attention calls it: the output over the scores, the gradient over dp.
  loss();
  Vec inplace = a, d = r;
  column_softmax_forward(inplace.data(), inplace.data(), N, cols);
  EXPECT_EQ(inplace, p);
  column_softmax_backward(d.data(), d.data(), p.data(), N, cols);
  EXPECT_EQ(d, da);
}

TEST(FastVsRef, ColumnSoftmax) {
  const test::WithThreads two(2);
  const int64_t N = 49, cols = 549;
  Rng rng(326);
  auto a = randn<float>(N * cols, rng, 3.0), dp = randn<float>(N * cols, rng);
  std::vector<float> p1(N * cols), p2(N * cols), da1(N * cols, std::nanf("")), da2(N * cols, std::nanf(""));
  column_softmax_forward(p1.data(), a.data(), N, cols);
  column_softmax_forward_ref(p2.data(), a.data(), N, cols);
  EXPECT_TRUE(close("p", p1, p2, tol::kFastVsRef));
  column_softmax_backward(da1.data(), dp.data(), p1.data(), N, cols);
  column_softmax_backward_ref(da2.data(), dp.data(), p2.data(), N, cols);
  EXPECT_TRUE(close("da", da1, da2, tol::kFastVsRef));
}

// sum_normalize: external attention's division by the sum over memory units, on positive
// inputs as the softmax before it gives (sums away from 0).
TEST(SumNormalize, GradientMatchesFiniteDifferences) {
  const int64_t R = 4, S = 6;
  Rng rng(327);
  Vec p(R * S), r = randn<double>(R * S, rng), out(R * S), psum(R);
  for (auto& v : p) v = 0.1 + std::abs(rng.normal());
  auto loss = [&] {
    sum_normalize_forward(out.data(), psum.data(), p.data(), R, S);
    return dot(r, out);
  };
  loss();
  EXPECT_NEAR(psum[1], p[6] + p[7] + p[8] + p[9] + p[10] + p[11], 1e-15);
  Vec dp(R * S, std::nan(""));
  sum_normalize_backward(dp.data(), r.data(), out.data(), psum.data(), R, S);
  expect_fd("dp", p, dp, loss);
  Vec dpr(R * S, std::nan(""));
  sum_normalize_backward_ref(dpr.data(), r.data(), p.data(), R, S);
  expect_fd("dp (ref)", p, dpr, loss);
  // In place: the output over p, the gradient over dr.
  loss();
  Vec inplace = p, d = r, ps(R);
  sum_normalize_forward(inplace.data(), ps.data(), inplace.data(), R, S);
  EXPECT_EQ(inplace, out);
  sum_normalize_backward(d.data(), d.data(), out.data(), psum.data(), R, S);
  EXPECT_EQ(d, dp);
}

TEST(FastVsRef, SumNormalize) {
  const int64_t R = 97, S = 67;
  Rng rng(328);
  std::vector<float> p(R * S);
  for (auto& v : p) v = float(0.01 + std::abs(rng.normal()));
  auto dr = randn<float>(R * S, rng);
  std::vector<float> r1(R * S), r2(R * S), s1(R), s2(R), dp1(R * S, std::nanf("")), dp2(R * S, std::nanf(""));
  sum_normalize_forward(r1.data(), s1.data(), p.data(), R, S);
  sum_normalize_forward_ref(r2.data(), s2.data(), p.data(), R, S);
  EXPECT_TRUE(close("r", r1, r2, tol::kFastVsRef));
  EXPECT_TRUE(close("psum", s1, s2, tol::kFastVsRef));
  sum_normalize_backward(dp1.data(), dr.data(), r1.data(), s1.data(), R, S);
  sum_normalize_backward_ref(dp2.data(), dr.data(), p.data(), R, S);
  EXPECT_TRUE(close("dp", dp1, dp2, tol::kFastVsRef));
}

// ---------------------------------------------------------------------------------------------
// embedding: ids drawn from a vocabulary smaller than the batch's tokens, so rows repeat and
// their gradients must add up; two segments per sequence.
struct TextIds {
  std::vector<int32_t> ids;
  std::vector<uint8_t> segs;
};
TextIds random_ids(int64_t N, int64_t B, int64_t V, Rng& rng) {
  TextIds t{std::vector<int32_t>(N * B), std::vector<uint8_t>(N * B)};
  for (auto& id : t.ids) id = int32_t(rng.below(uint64_t(V)));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < N; ++n) t.segs[b * N + n] = n >= N / 2;
  return t;
}

TEST(Embedding, GradientsMatchFiniteDifferences) {
  const int64_t N = 4, B = 3, D = 5, V = 6;
  Rng rng(331);
  const TextIds t = random_ids(N, B, V, rng);
  Vec table = randn<double>(V * D, rng), pos = randn<double>(N * D, rng), seg = randn<double>(2 * D, rng);
  Vec r = randn<double>(N * B * D, rng), x(N * B * D);
  for (const bool extras : {false, true}) {  // the token table alone, or with positions and segments
    SCOPED_TRACE(extras ? "positions and segments" : "tokens only");
    auto loss = [&] {
      embedding_forward(x.data(), t.ids.data(), extras ? t.segs.data() : nullptr, table.data(),
                        extras ? pos.data() : nullptr, extras ? seg.data() : nullptr, N, B, D);
      return dot(r, x);
    };
    loss();
    // Token-major: row n·B + b holds the token at (b, n).
    const int64_t n = 3, b = 1, id = t.ids[b * N + n];
    EXPECT_EQ(x[(n * B + b) * D + 2], extras ? table[id * D + 2] + pos[n * D + 2] + seg[1 * D + 2] : table[id * D + 2]);
    Vec dt0 = randn<double>(V * D, rng), dp0 = randn<double>(N * D, rng), ds0 = randn<double>(2 * D, rng);
    Vec dt = dt0, dp = dp0, ds = ds0;
    embedding_backward(dt.data(), extras ? dp.data() : nullptr, extras ? ds.data() : nullptr, r.data(), t.ids.data(),
                       extras ? t.segs.data() : nullptr, N, B, D);
    expect_fd("dtable", table, dt, dt0, loss);
    if (!extras) continue;
    expect_fd("dpos", pos, dp, dp0, loss);
    expect_fd("dseg", seg, ds, ds0, loss);
  }
}

TEST(FastVsRef, Embedding) {
  const int64_t N = 37, B = 11, D = 75, V = 101;
  Rng rng(332);
  const TextIds t = random_ids(N, B, V, rng);
  auto table = randn<float>(V * D, rng), pos = randn<float>(N * D, rng), seg = randn<float>(2 * D, rng);
  auto dx = randn<float>(N * B * D, rng);
  std::vector<float> x1(N * B * D), x2(N * B * D);
  embedding_forward(x1.data(), t.ids.data(), t.segs.data(), table.data(), pos.data(), seg.data(), N, B, D);
  embedding_forward_ref(x2.data(), t.ids.data(), t.segs.data(), table.data(), pos.data(), seg.data(), N, B, D);
  EXPECT_TRUE(close("x", x1, x2, tol::kFastVsRef));
  std::vector<float> dt[2], dp[2], ds[2];
  for (const int threads : {1, 2}) {  // scatter-adds in row order: the same bits either way
    const test::WithThreads with(threads);
    dt[threads - 1].assign(V * D, 0.5f), dp[threads - 1].assign(N * D, 0.5f), ds[threads - 1].assign(2 * D, 0.5f);
    embedding_backward(dt[threads - 1].data(), dp[threads - 1].data(), ds[threads - 1].data(), dx.data(), t.ids.data(),
                       t.segs.data(), N, B, D);
  }
  EXPECT_EQ(dt[0], dt[1]);
  EXPECT_EQ(dp[0], dp[1]);
  EXPECT_EQ(ds[0], ds[1]);
  std::vector<float> dt2(V * D, 0.5f), dp2(N * D, 0.5f), ds2(2 * D, 0.5f);
  embedding_backward_ref(dt2.data(), dp2.data(), ds2.data(), dx.data(), t.ids.data(), t.segs.data(), N, B, D);
  EXPECT_TRUE(close("dtable", dt[1], dt2, tol::kFastVsRef, 10.0));  // a few O(1) terms each
  EXPECT_TRUE(close("dpos", dp[1], dp2, tol::kFastVsRef, 10.0));    // sums of 11
  // Sums of N·B/2 ≈ 200 terms, ~√200 in size.
  const int64_t terms = N * B / 2;
  EXPECT_TRUE(close("dseg", ds[1], ds2, tol::kFastVsRef, std::sqrt(double(terms))));
}

// rel_bias: T5's buckets (t5_bucket) for a short sequence, so several (query, key) pairs share
// each bucket and their gradients must add up.
std::vector<int32_t> t5_buckets(int64_t N, int num_buckets, int max_distance) {
  std::vector<int32_t> buckets(N * N);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < N; ++j) buckets[i * N + j] = t5_bucket(int(j - i), num_buckets, max_distance);
  return buckets;
}

TEST(RelBias, GradientMatchesFiniteDifferences) {
  const int64_t N = 6, heads = 2, K = 6;  // K buckets
  const std::vector<int32_t> buckets = t5_buckets(N, int(K), 8);
  Rng rng(333);
  Vec table = randn<double>(K * heads, rng), r = randn<double>(heads * N * N, rng), bias(heads * N * N);
  auto loss = [&] {
    rel_bias_forward(bias.data(), buckets.data(), table.data(), heads, N);
    return dot(r, bias);
  };
  loss();
  EXPECT_EQ(bias[(1 * N + 2) * N + 4], table[buckets[2 * N + 4] * heads + 1]);  // head 1, (2, 4)
  Vec dt0 = randn<double>(K * heads, rng), dt = dt0;
  rel_bias_backward(dt.data(), r.data(), buckets.data(), heads, N);
  expect_fd("dtable", table, dt, dt0, loss);
}

TEST(FastVsRef, RelBias) {
  const int64_t N = 53, heads = 3, K = 32;
  const std::vector<int32_t> buckets = t5_buckets(N, int(K), 128);
  Rng rng(334);
  auto table = randn<float>(K * heads, rng), dbias = randn<float>(heads * N * N, rng);
  std::vector<float> b1(heads * N * N), b2(heads * N * N);
  rel_bias_forward(b1.data(), buckets.data(), table.data(), heads, N);
  rel_bias_forward_ref(b2.data(), buckets.data(), table.data(), heads, N);
  EXPECT_EQ(b1, b2);  // a gather: the same bits
  std::vector<float> dt[2];
  for (const int threads : {1, 2}) {
    const test::WithThreads with(threads);
    dt[threads - 1].assign(K * heads, 0.5f);
    rel_bias_backward(dt[threads - 1].data(), dbias.data(), buckets.data(), heads, N);
  }
  EXPECT_EQ(dt[0], dt[1]);
  std::vector<float> dt2(K * heads, 0.5f);
  rel_bias_backward_ref(dt2.data(), dbias.data(), buckets.data(), heads, N);
  // The far buckets hold hundreds of pairs: sums ~√(N²) in size.
  EXPECT_TRUE(close("dtable", dt[1], dt2, tol::kFastVsRef, double(N)));
}

}  // namespace
}  // namespace gmlp
