// The CNN ops (ops/conv2d.h, batchnorm.h, relu.h, global_avg_pool.h): convolution, batch norm,
// ReLU, global average pool. Backward passes against central finite differences in double (loss
// Σ r ⊙ f(inputs), random r), overwrite vs accumulate contracts, hand-computed values that pin
// the torch semantics, and every fast float op against its plain _ref twin on ragged shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "check.h"
#include "core/error.h"
#include "ops/batchnorm.h"
#include "ops/conv2d.h"
#include "ops/global_avg_pool.h"
#include "ops/relu.h"
#include "tolerances.h"

namespace gmlp {
namespace {

using test::close;
using test::randn;
using Vec = std::vector<double>;

using test::dot;
using test::expect_fd;

std::string describe(const ConvShape& s) {
  return "B" + std::to_string(s.B) + " Cin" + std::to_string(s.Cin) + " " + std::to_string(s.Hi) + "x" +
         std::to_string(s.Wi) + " Cout" + std::to_string(s.Cout) + " k" + std::to_string(s.k) + " stride" +
         std::to_string(s.stride) + " pad" + std::to_string(s.pad);
}

// Kernel / stride / pad combinations of a ResNet: 3×3 same, 3×3 downsampling, the 1×1 shortcut
// projection (stride 1 and 2), plus unpadded and over-padded 3×3 windows.
struct Geometry {
  int64_t k, stride, pad;
};
constexpr Geometry kGeometries[] = {{3, 1, 1}, {3, 2, 1}, {1, 2, 0}, {1, 1, 0}, {3, 2, 0}, {3, 1, 2}};

TEST(Conv, ShapeArithmeticFollowsTorch) {
  const ConvShape a{2, 3, 32, 32, 16, 3, 1, 1};
  EXPECT_EQ(a.Ho(), 32);
  EXPECT_EQ(a.col_rows(), 27);
  EXPECT_EQ(a.col_size(), 2 * 27 * 32 * 32);
  const ConvShape b{1, 16, 32, 31, 32, 3, 2, 1};  // floor((31 + 2 - 3) / 2) + 1 = 16
  EXPECT_EQ(b.Ho(), 16);
  EXPECT_EQ(b.Wo(), 16);
  const ConvShape c{1, 16, 7, 7, 32, 1, 2, 0};
  EXPECT_EQ(c.Ho(), 4);
}

TEST(Conv, MatchesHandComputedValues) {
  // x = 1..9 on a 3×3 grid, one channel.
  const double x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const double ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  // Cross-correlation, not convolution: a kernel with its one 1 at (ky 0, kx 0) reads the
  // pixel up-left of each output (pad 1), zero off the image.
  const double corner[9] = {1, 0, 0, 0, 0, 0, 0, 0, 0};
  const double sums_s1[9] = {12, 21, 16, 27, 45, 33, 24, 39, 28};
  const double sums_s2[4] = {12, 16, 24, 28};
  const double shifted[9] = {0, 0, 0, 0, 1, 2, 0, 4, 5};
  double col[81], y[9], yr[9];
  const ConvShape s1{1, 1, 3, 3, 1, 3, 1, 1}, s2{1, 1, 3, 3, 1, 3, 2, 1};
  conv2d_forward(y, x, ones, s1, col);
  conv2d_forward_ref(yr, x, ones, s1);
  EXPECT_TRUE(close("ones, stride 1", y, sums_s1, 9, 0.0));
  EXPECT_TRUE(close("ones, stride 1 (ref)", yr, sums_s1, 9, 0.0));
  conv2d_forward(y, x, ones, s2, col);
  conv2d_forward_ref(yr, x, ones, s2);
  EXPECT_TRUE(close("ones, stride 2", y, sums_s2, 4, 0.0));
  EXPECT_TRUE(close("ones, stride 2 (ref)", yr, sums_s2, 4, 0.0));
  conv2d_forward(y, x, corner, s1, col);
  conv2d_forward_ref(yr, x, corner, s1);
  EXPECT_TRUE(close("corner", y, shifted, 9, 0.0));
  EXPECT_TRUE(close("corner (ref)", yr, shifted, 9, 0.0));
}

TEST(Conv, GradientsMatchFiniteDifferences) {
  for (const Geometry g : kGeometries) {
    const ConvShape s{2, 2, 5, 6, 3, g.k, g.stride, g.pad};
    SCOPED_TRACE(describe(s));
    const int64_t nx = s.B * s.Cin * s.Hi * s.Wi, nw = s.Cout * s.col_rows();
    const int64_t ny = s.B * s.Cout * s.Ho() * s.Wo();
    Rng rng(100 + g.k * 10 + g.stride * 3 + g.pad);
    Vec x = randn<double>(nx, rng), w = randn<double>(nw, rng), r = randn<double>(ny, rng);
    Vec y(ny), col(s.col_size());
    auto loss = [&] {
      conv2d_forward(y.data(), x.data(), w.data(), s, col.data());
      return dot(r, y);
    };
    // dx is overwritten (NaN in it must not leak), dw accumulates; col's contents are ignored.
    Vec dx(nx, std::nan("")), dw0 = randn<double>(nw, rng), dw = dw0;
    std::fill(col.begin(), col.end(), std::nan(""));
    conv2d_backward(dx.data(), dw.data(), r.data(), x.data(), w.data(), s, col.data());
    expect_fd("dx", x, dx, Vec(nx, 0.0), loss);
    expect_fd("dw", w, dw, dw0, loss);
    // The reference twin, held to the same differences.
    Vec dxr(nx, std::nan("")), dwr = dw0;
    conv2d_backward_ref(dxr.data(), dwr.data(), r.data(), x.data(), w.data(), s);
    auto loss_ref = [&] {
      conv2d_forward_ref(y.data(), x.data(), w.data(), s);
      return dot(r, y);
    };
    expect_fd("dx (ref)", x, dxr, Vec(nx, 0.0), loss_ref);
    expect_fd("dw (ref)", w, dwr, dw0, loss_ref);
  }
}

TEST(Conv, BackwardWithoutDxStillAccumulatesDw) {
  const ConvShape s{2, 3, 6, 5, 4, 3, 2, 1};
  Rng rng(110);
  const int64_t nx = s.B * s.Cin * s.Hi * s.Wi, nw = s.Cout * s.col_rows();
  const int64_t ny = s.B * s.Cout * s.Ho() * s.Wo();
  Vec x = randn<double>(nx, rng), w = randn<double>(nw, rng), dy = randn<double>(ny, rng);
  Vec col(s.col_size()), dx(nx), dw1(nw, 0.5), dw2(nw, 0.5);
  conv2d_backward(dx.data(), dw1.data(), dy.data(), x.data(), w.data(), s, col.data());
  conv2d_backward<double>(nullptr, dw2.data(), dy.data(), x.data(), w.data(), s, col.data());
  EXPECT_TRUE(close("dw", dw2, dw1, 1e-15));
}

TEST(BatchNorm, TrainingGradientsMatchFiniteDifferences) {
  const int64_t B = 3, C = 2, HW = 5, n = B * C * HW;
  Rng rng(120);
  Vec x = randn<double>(n, rng, 2.0), gamma = randn<double>(C, rng), beta = randn<double>(C, rng);
  for (int64_t i = 0; i < n; ++i) x[i] += (i / HW) % C == 0 ? 3.0 : -1.0;  // channel offsets
  Vec r = randn<double>(n, rng), y(n), mean(C), rstd(C);
  auto loss = [&] {  // no running statistics: the loss stays a pure function of its inputs
    batchnorm_forward<double>(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(), beta.data(), nullptr, nullptr,
                              B, C, HW, true, 1e-5, 0.1);
    return dot(r, y);
  };
  loss();
  Vec dx(n, std::nan("")), dg0 = randn<double>(C, rng), db0 = randn<double>(C, rng);
  Vec dg = dg0, db = db0;
  batchnorm_backward(dx.data(), dg.data(), db.data(), r.data(), x.data(), mean.data(), rstd.data(), gamma.data(), B, C,
                     HW);
  expect_fd("dx", x, dx, Vec(n, 0.0), loss);
  expect_fd("dgamma", gamma, dg, dg0, loss);
  expect_fd("dbeta", beta, db, db0, loss);
  // The reference twin, from the same saved statistics.
  loss();
  Vec dxr(n, std::nan("")), dgr = dg0, dbr = db0;
  batchnorm_backward_ref(dxr.data(), dgr.data(), dbr.data(), r.data(), x.data(), mean.data(), rstd.data(), gamma.data(),
                         B, C, HW);
  expect_fd("dx (ref)", x, dxr, Vec(n, 0.0), loss);
  expect_fd("dgamma (ref)", gamma, dgr, dg0, loss);
  expect_fd("dbeta (ref)", beta, dbr, db0, loss);
}

TEST(BatchNorm, RunningStatisticsFollowTorch) {
  // One channel holding 1, 2 | 3, 4 over two images: mean 2.5, biased variance 1.25 (normalises),
  // unbiased 5/3 (enters running_var). torch.nn.BatchNorm2d(1, eps, momentum=0.1) from
  // running_mean 0, running_var 1: 0.25 and 0.9 + 0.1·5/3.
  const double x[4] = {1, 2, 3, 4}, gamma = 2.0, beta = 0.5, eps = 1e-5;
  using Fwd = void (*)(double*, double*, double*, const double*, const double*, const double*, double*, double*,
                       int64_t, int64_t, int64_t, bool, double, double);
  for (Fwd fwd : {Fwd(batchnorm_forward<double>), Fwd(batchnorm_forward_ref<double>)}) {
    double y[4], mean, rstd, rm = 0.0, rv = 1.0;
    fwd(y, &mean, &rstd, x, &gamma, &beta, &rm, &rv, 2, 1, 2, true, eps, 0.1);
    EXPECT_NEAR(mean, 2.5, 1e-15);
    EXPECT_NEAR(rstd, 1 / std::sqrt(1.25 + eps), 1e-15);
    EXPECT_NEAR(rm, 0.25, 1e-15);
    EXPECT_NEAR(rv, 0.9 + 0.1 * 5.0 / 3.0, 1e-15);
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], (x[i] - 2.5) / std::sqrt(1.25 + eps) * gamma + beta, 1e-14);
    // Eval normalises with the running statistics and leaves them alone.
    fwd(y, nullptr, nullptr, x, &gamma, &beta, &rm, &rv, 2, 1, 2, false, eps, 0.1);
    EXPECT_NEAR(rm, 0.25, 1e-15);
    EXPECT_NEAR(rv, 0.9 + 0.1 * 5.0 / 3.0, 1e-15);
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], (x[i] - rm) / std::sqrt(rv + eps) * gamma + beta, 1e-14);
  }
}

TEST(BatchNorm, TrainingOnOneValuePerChannelThrows) {
  const double x = 1, g = 1, b = 0;
  double y, m, r;
  EXPECT_THROW(batchnorm_forward<double>(&y, &m, &r, &x, &g, &b, nullptr, nullptr, 1, 1, 1, true, 1e-5, 0.1), Error);
}

TEST(Relu, ForwardAndBackward) {
  const int64_t n = 40;
  Rng rng(130);
  Vec x = randn<double>(n, rng), r = randn<double>(n, rng), y(n);
  for (auto& v : x) v += v < 0 ? -0.01 : 0.01;  // keep finite differences off the kink
  auto loss = [&] {
    relu_forward(y.data(), x.data(), n);
    return dot(r, y);
  };
  loss();
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[i], x[i] > 0 ? x[i] : 0.0);
  Vec d = r;
  relu_backward_inplace(d.data(), y.data(), n);
  expect_fd("dx", x, d, Vec(n, 0.0), loss);
  loss();     // y as at x (the differences left it at a perturbed point)
  Vec z = x;  // in place
  relu_forward(z.data(), z.data(), n);
  EXPECT_EQ(z, y);
  double nan = std::nan(""), out;
  relu_forward(&out, &nan, 1);
  EXPECT_TRUE(std::isnan(out));  // as torch.relu: a diverged activation stays visible
}

TEST(GlobalAvgPool, GradientMatchesFiniteDifferences) {
  const int64_t B = 3, C = 4, HW = 7;
  Rng rng(140);
  Vec x = randn<double>(B * C * HW, rng), r = randn<double>(B * C, rng), y(B * C);
  auto loss = [&] {
    global_avg_pool_forward(y.data(), x.data(), B, C, HW);
    return dot(r, y);
  };
  loss();
  EXPECT_NEAR(y[5], (x[35] + x[36] + x[37] + x[38] + x[39] + x[40] + x[41]) / 7, 1e-15);
  Vec dx(B * C * HW, std::nan(""));
  global_avg_pool_backward(dx.data(), r.data(), B, C, HW);
  expect_fd("dx", x, dx, Vec(B * C * HW, 0.0), loss);
}

// Fast float ops against _ref, shapes ragged (no multiple of a SIMD width) and big enough for
// oneDNN's blocked kernels.
TEST(FastVsRef, Conv) {
  for (const Geometry g : kGeometries) {
    const ConvShape s{4, 6, 13, 11, 20, g.k, g.stride, g.pad};
    SCOPED_TRACE(describe(s));
    const int64_t nx = s.B * s.Cin * s.Hi * s.Wi, nw = s.Cout * s.col_rows();
    const int64_t ny = s.B * s.Cout * s.Ho() * s.Wo();
    Rng rng(200 + g.k * 10 + g.stride * 3 + g.pad);
    auto x = randn<float>(nx, rng), w = randn<float>(nw, rng, 0.2), dy = randn<float>(ny, rng);
    std::vector<float> y1(ny, std::nanf("")), y2(ny), col(s.col_size(), std::nanf(""));
    conv2d_forward(y1.data(), x.data(), w.data(), s, col.data());
    conv2d_forward_ref(y2.data(), x.data(), w.data(), s);
    EXPECT_TRUE(close("y", y1, y2, tol::kFastVsRef));
    std::fill(col.begin(), col.end(), std::nanf(""));
    std::vector<float> dx1(nx, std::nanf("")), dx2(nx, std::nanf("")), dw1(nw, 1.f), dw2(nw, 1.f);
    conv2d_backward(dx1.data(), dw1.data(), dy.data(), x.data(), w.data(), s, col.data());
    conv2d_backward_ref(dx2.data(), dw2.data(), dy.data(), x.data(), w.data(), s);
    EXPECT_TRUE(close("dx", dx1, dx2, tol::kFastVsRef));
    // Each dw sums B·Ho·Wo (up to 572) O(1) products, so it is ~√(terms) in size: relative to that.
    EXPECT_TRUE(close("dw", dw1, dw2, tol::kFastVsRef, std::sqrt(double(s.B * s.Ho() * s.Wo()))));
  }
}

TEST(FastVsRef, BatchNorm) {
  const int64_t B = 5, C = 7, HW = 37, n = B * C * HW;
  Rng rng(210);
  auto x = randn<float>(n, rng, 3.0), gamma = randn<float>(C, rng), beta = randn<float>(C, rng);
  for (int64_t i = 0; i < n; ++i) x[i] += float((i / HW) % C) - 3.f;  // channel offsets
  auto dy = randn<float>(n, rng);
  std::vector<float> rm0 = randn<float>(C, rng), rv0(C);
  for (int64_t c = 0; c < C; ++c) rv0[c] = 0.5f + float(c) / 4;
  auto rm1 = rm0, rv1 = rv0, rm2 = rm0, rv2 = rv0;
  std::vector<float> y1(n), y2(n), m1(C), m2(C), r1(C), r2(C);
  // Training: batch statistics, running statistics updated.
  batchnorm_forward(y1.data(), m1.data(), r1.data(), x.data(), gamma.data(), beta.data(), rm1.data(), rv1.data(), B, C,
                    HW, true, 1e-5f, 0.1f);
  batchnorm_forward_ref(y2.data(), m2.data(), r2.data(), x.data(), gamma.data(), beta.data(), rm2.data(), rv2.data(), B,
                        C, HW, true, 1e-5f, 0.1f);
  EXPECT_TRUE(close("y", y1, y2, tol::kFastVsRef));
  EXPECT_TRUE(close("mean", m1, m2, tol::kFastVsRef));
  EXPECT_TRUE(close("rstd", r1, r2, tol::kFastVsRef));
  EXPECT_TRUE(close("running_mean", rm1, rm2, tol::kFastVsRef));
  EXPECT_TRUE(close("running_var", rv1, rv2, tol::kFastVsRef));
  std::vector<float> dx1(n, std::nanf("")), dx2(n, std::nanf("")), dg1(C, 0.5f), db1(C, -0.5f);
  auto dg2 = dg1, db2 = db1;
  batchnorm_backward(dx1.data(), dg1.data(), db1.data(), dy.data(), x.data(), m1.data(), r1.data(), gamma.data(), B, C,
                     HW);
  batchnorm_backward_ref(dx2.data(), dg2.data(), db2.data(), dy.data(), x.data(), m2.data(), r2.data(), gamma.data(), B,
                         C, HW);
  EXPECT_TRUE(close("dx", dx1, dx2, tol::kFastVsRef));
  EXPECT_TRUE(close("dgamma", dg1, dg2, tol::kFastVsRef));
  EXPECT_TRUE(close("dbeta", db1, db2, tol::kFastVsRef));
  // In place (y aliases x): the same output and update.
  auto xin = x, rm3 = rm0, rv3 = rv0;
  batchnorm_forward(xin.data(), m1.data(), r1.data(), xin.data(), gamma.data(), beta.data(), rm3.data(), rv3.data(), B,
                    C, HW, true, 1e-5f, 0.1f);
  EXPECT_EQ(xin, y1);
  EXPECT_EQ(rm3, rm1);
  EXPECT_EQ(rv3, rv1);
  // Eval: the running statistics normalise, and stay as they were.
  rm3 = rm1;
  rv3 = rv1;
  batchnorm_forward(y1.data(), m1.data(), r1.data(), x.data(), gamma.data(), beta.data(), rm1.data(), rv1.data(), B, C,
                    HW, false, 1e-5f, 0.1f);
  batchnorm_forward_ref(y2.data(), m2.data(), r2.data(), x.data(), gamma.data(), beta.data(), rm2.data(), rv2.data(), B,
                        C, HW, false, 1e-5f, 0.1f);
  EXPECT_TRUE(close("y (eval)", y1, y2, tol::kFastVsRef));
  EXPECT_TRUE(close("rstd (eval)", r1, r2, tol::kFastVsRef));
  EXPECT_EQ(rm1, rm3);
  EXPECT_EQ(rv1, rv3);
  EXPECT_EQ(m1, rm3);
}

}  // namespace
}  // namespace gmlp
