// The ops the models compose beyond the layers of tests/test_ops.cpp: add_relu (the CNN block
// output); affine (ResMLP), layer_scale.
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
#include "ops/add_relu.h"
#include "ops/affine.h"
#include "ops/layer_scale.h"
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
    affine_backward(dx[threads - 1].data(), da[threads - 1].data(), db[threads - 1].data(), dy.data(),
                    x.data(), alpha.data(), M, D);
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
      layer_scale_backward(dy[threads - 1].data(), dg[threads - 1].data(), dout.data(), y.data(), k,
                           gamma.data(), N, B, D);
    }
    EXPECT_EQ(dy[0], dy[1]);
    EXPECT_EQ(dg[0], dg[1]);
    std::vector<float> dy2(N * B * D, std::nanf("")), dg2(D, 0.5f);
    layer_scale_backward_ref(dy2.data(), dg2.data(), dout.data(), y.data(), k, gamma.data(), N, B, D);
    EXPECT_TRUE(close("dy", dy[1], dy2, tol::kFastVsRef));
    EXPECT_TRUE(close("dgamma", dg[1], dg2, tol::kFastVsRef, 10.0));  // sums of 78 terms
  }
}

}  // namespace
}  // namespace gmlp
