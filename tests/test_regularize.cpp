// DeiT-style regularisation: soft-target cross-entropy, Mixup/CutMix (timm.data.Mixup, 'batch'
// mode), random erasing (timm RandomErasing, 'pixel' mode) and the Gamma/Beta samplers.
// Statistical checks use fixed seeds and bounds of kSigmas standard errors derived from the
// sample size, so a correct sampler passes with overwhelming probability and a wrong mean,
// variance or distribution shape fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

#include "check.h"
#include "core/error.h"
#include "data/erase.h"
#include "data/mix.h"
#include "ops/cross_entropy.h"
#include "ops/soft_cross_entropy.h"
#include "tolerances.h"

namespace gmlp {
namespace {

using data::MixConfig;
using data::MixMode;
using data::MixResult;
using data::PixelBox;
using test::close;
using test::randn;
using Vec = std::vector<double>;
using FVec = std::vector<float>;

// Statistical bounds: |estimate - truth| <= kSigmas · standard error. A normal deviate exceeds 5σ
// with probability 6e-7.
constexpr double kSigmas = 5.0;
// The soft and the integer-label cross-entropy compute the same sum in a different grouping
// ((1-s)·nll + s·mean vs Σ t·(-log p)) from the same double accumulators; in double they differ
// by a few ulps of O(10) terms.
constexpr double kSameSumDouble = 1e-12;
// In float the targets s/K and 1-s+s/K are themselves rounded to float (2^-24 relative).
constexpr double kSameSumFloat = 1e-6;
// One float mixing step is two float products and a sum (3 roundings of 2^-24, or fewer with
// FMA contraction) on O(1) values, compared with the same formula in double.
constexpr double kFloatMix = 1e-6;

// ---------------------------------------------------------------------------------------------
// Soft-target cross-entropy

template <class T>
void expect_soft_matches_hard(double tol) {
  const int64_t B = 5, K = 7;
  Rng rng(11);
  const std::vector<T> logits = randn<T>(B * K, rng, 3.0);
  const std::vector<int32_t> labels = {0, 6, 3, 3, 1};
  for (T s : {T(0), T(0.1), T(0.35)}) {
    std::vector<T> targets(B * K), p_hard(B * K), p_soft(B * K), d_hard(B * K), d_soft(B * K);
    smooth_one_hot(targets.data(), labels.data(), B, K, s);
    const T hard = cross_entropy_forward(p_hard.data(), logits.data(), labels.data(), B, K, s);
    const T soft = soft_cross_entropy_forward(p_soft.data(), logits.data(), targets.data(), B, K);
    EXPECT_NEAR(double(soft), double(hard), tol * std::max(1.0, std::abs(double(hard)))) << "smoothing " << s;
    // Same softmax code and the same (p - q)·(1/B) arithmetic: identical bits.
    EXPECT_EQ(p_soft, p_hard) << "smoothing " << s;
    cross_entropy_backward(d_hard.data(), p_hard.data(), labels.data(), B, K, s);
    soft_cross_entropy_backward(d_soft.data(), p_soft.data(), targets.data(), B, K);
    EXPECT_EQ(d_soft, d_hard) << "smoothing " << s;
  }
}

TEST(SoftCrossEntropy, EqualsCrossEntropyOnSmoothedOneHotsDouble) { expect_soft_matches_hard<double>(kSameSumDouble); }

TEST(SoftCrossEntropy, EqualsCrossEntropyOnSmoothedOneHotsFloat) { expect_soft_matches_hard<float>(kSameSumFloat); }

TEST(SoftCrossEntropy, MatchesHandComputedValue) {
  // logits (0, ln 3): p = (1/4, 3/4); targets (0.3, 0.7): loss = -(0.3 ln 1/4 + 0.7 ln 3/4).
  const double logits[2] = {0.0, std::log(3.0)}, targets[2] = {0.3, 0.7};
  double probs[2];
  const double loss = soft_cross_entropy_forward(probs, logits, targets, 1, 2);
  EXPECT_NEAR(loss, -(0.3 * std::log(0.25) + 0.7 * std::log(0.75)), 1e-12);
  EXPECT_NEAR(probs[0], 0.25, 1e-12);
}

TEST(SoftCrossEntropy, GradientMatchesFiniteDifferences) {
  const int64_t B = 4, K = 6;
  Rng rng(12);
  Vec logits = randn<double>(B * K, rng, 3.0), probs(B * K), dl(B * K), targets(B * K);
  // Dense random targets with rows summing to 1 (the backward's precondition).
  for (int64_t b = 0; b < B; ++b) {
    double sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += targets[b * K + k] = rng.uniform() + 0.01;
    for (int64_t k = 0; k < K; ++k) targets[b * K + k] /= sum;
  }
  auto loss = [&] { return soft_cross_entropy_forward(probs.data(), logits.data(), targets.data(), B, K); };
  loss();
  soft_cross_entropy_backward(dl.data(), probs.data(), targets.data(), B, K);
  test::expect_fd("dlogits", logits, dl, loss);
}

TEST(SoftCrossEntropy, SmoothOneHotIsTimmMixupTarget) {
  const int32_t labels[3] = {2, 0, 4};
  double t[3 * 5];
  smooth_one_hot(t, labels, 3, 5, 0.1);
  for (int b = 0; b < 3; ++b) {
    double sum = 0;
    for (int k = 0; k < 5; ++k) {
      EXPECT_DOUBLE_EQ(t[b * 5 + k], k == labels[b] ? 1 - 0.1 + 0.02 : 0.02) << b << "," << k;
      sum += t[b * 5 + k];
    }
    EXPECT_NEAR(sum, 1.0, 1e-15);
  }
  const int32_t bad = 5;  // labels are checked when read: one out of range here is a bug
  EXPECT_THROW(smooth_one_hot(t, &bad, 1, 5, 0.1), InternalError);
}

// ---------------------------------------------------------------------------------------------
// Mixup / CutMix

// The smoothed one-hot value of class k for label y.
double soft_label(int k, int y, int K, double s) { return k == y ? 1 - s + s / K : s / K; }

TEST(Mix, MixupWithForcedLambdaIsExact) {
  // Dyadic pixels, λ = 3/4 and smoothing 1/4 with K = 4 (off 1/16, on 13/16) make every
  // product and sum exact in float, so the expected values are exact whatever the rounding.
  for (int B : {4, 5}) {
    const int C = 2, S = 3, K = 4, n = C * S * S;
    FVec images(B * n);
    for (int i = 0; i < B * n; ++i) images[i] = float((i * 37) % 29 - 14) / 8.f;
    const FVec orig = images;
    std::vector<int32_t> labels(B);
    for (int b = 0; b < B; ++b) labels[b] = (b * 3 + 1) % K;
    FVec targets(B * K, -1.f);
    Rng rng(1);
    const auto state = rng.state();
    const MixResult r =
        data::apply_mix(images.data(), B, C, S, targets.data(), labels.data(), K, MixMode::kMixup, 0.75, 0.25f, rng);
    EXPECT_EQ(r.mode, MixMode::kMixup);
    EXPECT_EQ(r.lam, 0.75);
    EXPECT_EQ(rng.state(), state) << "mixup with a given λ must not draw";
    for (int b = 0; b < B; ++b) {
      const int j = B - 1 - b;
      for (int p = 0; p < n; ++p)
        ASSERT_EQ(images[b * n + p], 0.75f * orig[b * n + p] + 0.25f * orig[j * n + p])
            << "B " << B << " sample " << b << " pixel " << p;
      float sum = 0;
      for (int k = 0; k < K; ++k) {
        const double want = 0.75 * soft_label(k, labels[b], K, 0.25) + 0.25 * soft_label(k, labels[j], K, 0.25);
        EXPECT_EQ(targets[b * K + k], float(want)) << "B " << B << " row " << b << " class " << k;
        sum += targets[b * K + k];
      }
      EXPECT_EQ(sum, 1.f) << "row " << b;
    }
  }
}

TEST(Mix, MixupMatchesDoubleFormula) {
  const int B = 6, C = 3, S = 5, K = 10, n = C * S * S;
  const double lam = 0.3137;
  Rng rng(2);
  FVec images = randn<float>(B * n, rng);
  const FVec orig = images;
  const std::vector<int32_t> labels = {9, 0, 4, 4, 7, 1};
  FVec targets(B * K);
  data::apply_mix(images.data(), B, C, S, targets.data(), labels.data(), K, MixMode::kMixup, lam, 0.1f, rng);
  Vec want_img(B * n), want_t(B * K);
  for (int b = 0; b < B; ++b) {
    const int j = B - 1 - b;
    for (int p = 0; p < n; ++p) want_img[b * n + p] = lam * orig[b * n + p] + (1 - lam) * orig[j * n + p];
    double sum = 0;
    for (int k = 0; k < K; ++k) {
      want_t[b * K + k] = lam * soft_label(k, labels[b], K, 0.1) + (1 - lam) * soft_label(k, labels[j], K, 0.1);
      sum += targets[b * K + k];
    }
    EXPECT_NEAR(sum, 1.0, K * kFloatMix) << "row " << b;
  }
  EXPECT_TRUE(close("images", images.data(), want_img.data(), B * n, kFloatMix));
  EXPECT_TRUE(close("targets", targets.data(), want_t.data(), B * K, kFloatMix));
}

TEST(Mix, NoneLeavesImagesAndGivesSmoothedOneHots) {
  const int B = 3, C = 1, S = 4, K = 5;
  Rng rng(3);
  FVec images = randn<float>(B * C * S * S, rng);
  const FVec orig = images;
  const int32_t labels[B] = {4, 1, 0};
  FVec targets(B * K), want(B * K);
  const MixResult r =
      data::apply_mix(images.data(), B, C, S, targets.data(), labels, K, MixMode::kNone, 0.2, 0.1f, rng);
  EXPECT_EQ(r.mode, MixMode::kNone);
  EXPECT_EQ(r.lam, 1.0);
  EXPECT_EQ(images, orig);
  for (int b = 0; b < B; ++b)
    for (int k = 0; k < K; ++k) want[b * K + k] = float(soft_label(k, labels[b], K, 0.1));
  EXPECT_EQ(targets, want);
}

// Checks that `images` is `orig` with `box` taken from the partner B-1-i, pixel for pixel.
void expect_cutmix(const FVec& images, const FVec& orig, int B, int C, int S, const PixelBox& box) {
  const int n = C * S * S;
  int wrong = 0;
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < C; ++c)
      for (int y = 0; y < S; ++y)
        for (int x = 0; x < S; ++x) {
          const bool in = y >= box.y0 && y < box.y1 && x >= box.x0 && x < box.x1;
          const int src = in ? B - 1 - b : b, p = (c * S + y) * S + x;
          if (images[b * n + p] != orig[src * n + p] && ++wrong <= 5)
            ADD_FAILURE() << "sample " << b << " c " << c << " y " << y << " x " << x
                          << (in ? " (in box)" : " (outside box)");
        }
  EXPECT_EQ(wrong, 0);
}

TEST(Mix, CutmixPastesTheBoxFromThePartnerAndCorrectsLambda) {
  const int C = 3, S = 16, K = 7;
  int nonempty = 0;
  for (int B : {2, 5, 6})
    for (double lam : {0.0, 0.2, 0.5, 0.77, 0.99, 1.0})
      for (uint64_t seed = 0; seed < 20; ++seed) {
        Rng rng(100 + seed);
        FVec images = randn<float>(B * C * S * S, rng);
        const FVec orig = images;
        std::vector<int32_t> labels(B);
        for (int b = 0; b < B; ++b) labels[b] = int32_t(rng.below(K));
        FVec targets(B * K);
        const MixResult r =
            data::apply_mix(images.data(), B, C, S, targets.data(), labels.data(), K, MixMode::kCutmix, lam, 0.1f, rng);
        ASSERT_EQ(r.mode, MixMode::kCutmix);
        const PixelBox& bx = r.box;
        ASSERT_TRUE(0 <= bx.y0 && bx.y0 <= bx.y1 && bx.y1 <= S && 0 <= bx.x0 && bx.x0 <= bx.x1 && bx.x1 <= S);
        // timm rand_bbox: half-side int(S·sqrt(1-λ)) / 2 either side of the centre, clipped.
        const int half = int(S * std::sqrt(1 - lam)) / 2;
        for (auto [lo, hi] : {std::pair{bx.y0, bx.y1}, std::pair{bx.x0, bx.x1}}) {
          EXPECT_LE(hi - lo, 2 * half);
          if (lo > 0 && hi < S) {
            EXPECT_EQ(hi - lo, 2 * half) << "unclipped side";
          }
        }
        EXPECT_EQ(r.lam, 1.0 - double(bx.area()) / (S * S));
        nonempty += bx.area() > 0;
        expect_cutmix(images, orig, B, C, S, bx);
        for (int b = 0; b < B; ++b) {
          double sum = 0;
          for (int k = 0; k < K; ++k) {
            const double want =
                r.lam * soft_label(k, labels[b], K, 0.1) + (1 - r.lam) * soft_label(k, labels[B - 1 - b], K, 0.1);
            EXPECT_NEAR(targets[b * K + k], want, kFloatMix);
            sum += targets[b * K + k];
          }
          EXPECT_NEAR(sum, 1.0, K * kFloatMix);
        }
      }
  EXPECT_GT(nonempty, 200);  // most of the 360 boxes hold pixels
}

TEST(Mix, CutmixBoxFollowsRandBbox) {
  // rand_bbox draws cy then cx uniformly in [0, S); replay those draws with a twin rng.
  const int S = 32;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const double lam = double(seed % 10) / 10.0;
    Rng rng(seed), twin(seed);
    const PixelBox bx = data::cutmix_box(S, lam, rng);
    const int cut = int(S * std::sqrt(1 - lam));
    const int cy = int(twin.below(S)), cx = int(twin.below(S));
    EXPECT_EQ(bx.y0, std::clamp(cy - cut / 2, 0, S));
    EXPECT_EQ(bx.y1, std::clamp(cy + cut / 2, 0, S));
    EXPECT_EQ(bx.x0, std::clamp(cx - cut / 2, 0, S));
    EXPECT_EQ(bx.x1, std::clamp(cx + cut / 2, 0, S));
    EXPECT_EQ(rng.state(), twin.state());
  }
}

TEST(Mix, MixBatchDrawsModesAndLambdasLikeTimm) {
  // Default config: always mixes, CutMix with probability 1/2, λ ~ Beta(α, α) (mean 1/2).
  const int B = 4, C = 1, S = 8, K = 3, N = 4000, n = C * S * S;
  const MixConfig cfg;
  Rng rng(7);
  const int32_t labels[B] = {0, 1, 2, 1};
  int cutmix = 0, mixup = 0;
  double mixup_lam_sum = 0;
  for (int it = 0; it < N; ++it) {
    FVec images(B * n);
    for (int i = 0; i < B * n; ++i) images[i] = float(i);
    const FVec orig = images;
    FVec targets(B * K);
    const MixResult r = data::mix_batch(images.data(), B, C, S, targets.data(), labels, K, cfg, rng);
    ASSERT_TRUE(r.lam >= 0 && r.lam <= 1);
    if (r.mode == MixMode::kCutmix) {
      ++cutmix;
      EXPECT_EQ(r.lam, 1.0 - double(r.box.area()) / (S * S));
      expect_cutmix(images, orig, B, C, S, r.box);
    } else {
      ASSERT_EQ(r.mode, MixMode::kMixup);
      ++mixup;
      mixup_lam_sum += r.lam;
      Vec want(B * n);
      for (int b = 0; b < B; ++b)
        for (int p = 0; p < n; ++p) want[b * n + p] = r.lam * orig[b * n + p] + (1 - r.lam) * orig[(B - 1 - b) * n + p];
      EXPECT_TRUE(close("mixup images", images.data(), want.data(), B * n, kFloatMix));
    }
    // Targets always use the reported λ.
    FVec want(B * K);
    data::mix_targets(want.data(), labels, B, K, r.lam, cfg.smoothing);
    EXPECT_EQ(targets, want);
  }
  const double se_switch = std::sqrt(0.25 / N);
  EXPECT_NEAR(double(cutmix) / N, 0.5, kSigmas * se_switch);
  // Beta(0.8, 0.8): variance 1/(4(2α+1)) = 0.0962.
  const double se_lam = std::sqrt(1.0 / (4 * (2 * 0.8 + 1)) / mixup);
  EXPECT_NEAR(mixup_lam_sum / mixup, 0.5, kSigmas * se_lam);
}

TEST(Mix, MixBatchProbabilityAndSingleModes) {
  const int B = 2, C = 1, S = 4, K = 2, N = 4000;
  const int32_t labels[B] = {0, 1};
  FVec images(B * C * S * S, 1.f), targets(B * K);
  {  // prob 0: disabled, never mixes, draws nothing, smoothed one-hot targets
    MixConfig cfg;
    cfg.prob = 0;
    EXPECT_FALSE(cfg.enabled());
    Rng rng(8);
    const auto state = rng.state();
    const MixResult r = data::mix_batch(images.data(), B, C, S, targets.data(), labels, K, cfg, rng);
    EXPECT_EQ(r.mode, MixMode::kNone);
    EXPECT_EQ(rng.state(), state);
    EXPECT_EQ(targets, (FVec{0.95f, 0.05f, 0.05f, 0.95f}));
  }
  {  // prob 0.3: a binomial fraction of batches is mixed
    MixConfig cfg;
    cfg.prob = 0.3f;
    Rng rng(9);
    int mixed = 0;
    for (int it = 0; it < N; ++it)
      mixed += data::mix_batch(images.data(), B, C, S, targets.data(), labels, K, cfg, rng).mode != MixMode::kNone;
    EXPECT_NEAR(double(mixed) / N, 0.3, kSigmas * std::sqrt(0.3 * 0.7 / N));
  }
  for (bool cut_only : {false, true}) {  // one alpha zero: always the other mode
    MixConfig cfg;
    (cut_only ? cfg.mixup_alpha : cfg.cutmix_alpha) = 0;
    EXPECT_TRUE(cfg.enabled());
    Rng rng(10);
    for (int it = 0; it < 200; ++it)
      EXPECT_EQ(data::mix_batch(images.data(), B, C, S, targets.data(), labels, K, cfg, rng).mode,
                cut_only ? MixMode::kCutmix : MixMode::kMixup);
  }
  MixConfig off;
  off.mixup_alpha = off.cutmix_alpha = 0;
  EXPECT_FALSE(off.enabled());
  MixConfig bad;
  bad.switch_prob = 1.5f;
  Rng rng(11);
  EXPECT_THROW(data::mix_batch(images.data(), B, C, S, targets.data(), labels, K, bad, rng), Error);
  EXPECT_STREQ(data::mix_mode_name(MixMode::kCutmix), "cutmix");
}

// ---------------------------------------------------------------------------------------------
// Random erasing

TEST(Erase, ProbabilityOneErasesOneBoxOfValidAreaAndAspect) {
  const int C = 3, S = 40, runs = 600;
  double min_area = 1, max_area = 0, min_log_aspect = 9, max_log_aspect = -9;
  double fill_sum = 0, fill_sq = 0;
  int64_t fill_n = 0;
  int erased = 0, touched_bottom = 0, touched_right = 0, touched_top = 0, touched_left = 0;
  for (int it = 0; it < runs; ++it) {
    Rng rng(1000 + it);
    FVec image = randn<float>(C * S * S, rng, 0.1);  // far from N(0,1) fill, so changes show
    const FVec orig = image;
    PixelBox bx;
    if (!data::random_erase(image.data(), C, S, data::EraseConfig{1.f}, rng, &bx)) {
      EXPECT_EQ(image, orig) << "a failed erase must not touch the image";
      continue;
    }
    ++erased;
    const int h = bx.y1 - bx.y0, w = bx.x1 - bx.x0;
    ASSERT_TRUE(0 <= bx.y0 && h >= 1 && h < S && bx.y1 <= S && 0 <= bx.x0 && w >= 1 && w < S && bx.x1 <= S);
    touched_bottom += bx.y1 == S;
    touched_right += bx.x1 == S;
    touched_top += bx.y0 == 0;
    touched_left += bx.x0 == 0;
    // Changed pixels are exactly the box, in every channel.
    for (int c = 0; c < C; ++c)
      for (int y = 0; y < S; ++y)
        for (int x = 0; x < S; ++x) {
          const int p = (c * S + y) * S + x;
          const bool in = y >= bx.y0 && y < bx.y1 && x >= bx.x0 && x < bx.x1;
          ASSERT_EQ(image[p] != orig[p], in) << "c " << c << " y " << y << " x " << x;
          if (in) {
            fill_sum += image[p];
            fill_sq += double(image[p]) * image[p];
            ++fill_n;
          }
        }
    // h = round(sqrt(A·r)), w = round(sqrt(A/r)): A ∈ [(h-½)(w-½), (h+½)(w+½)] and
    // r ∈ [(h-½)/(w+½), (h+½)/(w-½)] must meet A/S² ∈ [0.02, 1/3] and r ∈ [0.3, 1/0.3].
    const double a_lo = (h - 0.5) * (w - 0.5) / (S * S), a_hi = (h + 0.5) * (w + 0.5) / (S * S);
    const double r_lo = (h - 0.5) / (w + 0.5), r_hi = (h + 0.5) / (w - 0.5);
    EXPECT_TRUE(a_hi >= 0.02 && a_lo <= 1.0 / 3.0) << "h " << h << " w " << w;
    EXPECT_TRUE(r_hi >= 0.3 && r_lo <= 1 / 0.3) << "h " << h << " w " << w;
    min_area = std::min(min_area, double(h) * w / (S * S));
    max_area = std::max(max_area, double(h) * w / (S * S));
    min_log_aspect = std::min(min_log_aspect, std::log(double(h) / w));
    max_log_aspect = std::max(max_log_aspect, std::log(double(h) / w));
  }
  // Ten attempts almost never all fail at S = 40 (a single one fails only for h or w >= S).
  EXPECT_GE(erased, runs - 3);
  // The draws span the ranges: areas from near 2% to near 1/3, aspects from near 0.3 to 3.3.
  EXPECT_LT(min_area, 0.03);
  EXPECT_GT(max_area, 0.3);
  EXPECT_LT(min_log_aspect, std::log(0.4));
  EXPECT_GT(max_log_aspect, std::log(2.5));
  // top ~ U{0..S-h} and left ~ U{0..S-w}: both ends are reached.
  EXPECT_GT(touched_top, 0);
  EXPECT_GT(touched_left, 0);
  EXPECT_GT(touched_bottom, 0) << "top must reach S - h";
  EXPECT_GT(touched_right, 0) << "left must reach S - w";
  // 'pixel' mode: the fill is N(0, 1).
  const double mean = fill_sum / fill_n, var = fill_sq / fill_n - mean * mean;
  EXPECT_NEAR(mean, 0.0, kSigmas / std::sqrt(double(fill_n)));
  EXPECT_NEAR(var, 1.0, kSigmas * std::sqrt(2.0 / fill_n));
}

TEST(Erase, ProbabilityZeroChangesNothing) {
  const int C = 3, S = 8;
  Rng rng(5);
  FVec image = randn<float>(C * S * S, rng);
  const FVec orig = image;
  const auto state = rng.state();
  for (int it = 0; it < 100; ++it) EXPECT_FALSE(data::random_erase(image.data(), C, S, data::EraseConfig{0.f}, rng));
  EXPECT_EQ(image, orig);
  EXPECT_EQ(rng.state(), state);
}

TEST(Erase, DefaultProbabilityErasesAQuarterOfImages) {
  const int C = 1, S = 16, N = 4000;
  const data::EraseConfig cfg;
  EXPECT_EQ(cfg.prob, 0.25f);
  Rng rng(6);
  FVec image(C * S * S);
  int erased = 0;
  for (int it = 0; it < N; ++it) erased += data::random_erase(image.data(), C, S, cfg, rng);
  // A few of the would-be erasures fail all ten attempts; that moves the rate by < 1e-3.
  EXPECT_NEAR(double(erased) / N, 0.25, kSigmas * std::sqrt(0.25 * 0.75 / N));
  EXPECT_THROW(data::random_erase(image.data(), C, S, data::EraseConfig{-0.5f}, rng), Error);
}

// ---------------------------------------------------------------------------------------------
// Gamma / Beta samplers

TEST(Beta, GammaMomentsMatch) {
  const int N = 200000;
  for (double k : {0.3, 1.0, 2.5, 10.0}) {
    Rng rng(20);
    double s = 0, s2 = 0;
    for (int i = 0; i < N; ++i) {
      const double g = data::sample_gamma(rng, k);
      ASSERT_TRUE(g >= 0 && std::isfinite(g));
      s += g;
      s2 += g * g;
    }
    const double mean = s / N, var = s2 / N - mean * mean;
    // Gamma(k, 1): mean k, variance k, fourth central moment 3k² + 6k.
    EXPECT_NEAR(mean, k, kSigmas * std::sqrt(k / N)) << "shape " << k;
    EXPECT_NEAR(var, k, kSigmas * std::sqrt((2 * k * k + 6 * k) / N)) << "shape " << k;
  }
}

TEST(Beta, MomentsMatch) {
  const int N = 200000;
  for (auto [a, b] : {std::pair{0.8, 0.8}, {1.0, 1.0}, {0.2, 0.2}, {2.0, 5.0}, {0.5, 3.0}}) {
    Rng rng(21);
    double s = 0, s2 = 0;
    for (int i = 0; i < N; ++i) {
      const double x = data::sample_beta(rng, a, b);
      ASSERT_TRUE(x >= 0 && x <= 1) << x;
      s += x;
      s2 += x * x;
    }
    const double mean = s / N, var = s2 / N - mean * mean;
    const double m = a / (a + b), v = a * b / ((a + b) * (a + b) * (a + b + 1));
    const double kurt = 6 * ((a - b) * (a - b) * (a + b + 1) - a * b * (a + b + 2)) /
                        (a * b * (a + b + 2) * (a + b + 3));  // excess kurtosis
    // Var(sample variance) ≈ (μ4 - σ⁴)/N = σ⁴ (kurt + 2)/N.
    EXPECT_NEAR(mean, m, kSigmas * std::sqrt(v / N)) << "Beta(" << a << ", " << b << ")";
    EXPECT_NEAR(var, v, kSigmas * v * std::sqrt((kurt + 2) / N)) << "Beta(" << a << ", " << b << ")";
  }
}

TEST(Beta, DistributionPassesKolmogorovSmirnov) {
  // Beta(a, 1) has CDF x^a and Beta(1, b) has CDF 1 - (1 - x)^b: both branches of the Gamma
  // sampler (shape < 1 and >= 1) against exact CDFs. Critical value 1.95/sqrt(N) is the 0.1%
  // level of the KS statistic.
  const int N = 20000;
  struct Case {
    double a, b;
    std::function<double(double)> cdf;
  };
  const std::vector<Case> cases = {
      {0.5, 1.0, [](double x) { return std::sqrt(x); }},
      {2.0, 1.0, [](double x) { return x * x; }},
      {1.0, 3.0, [](double x) { return 1 - std::pow(1 - x, 3); }},
      {1.0, 1.0, [](double x) { return x; }},
  };
  for (const Case& c : cases) {
    Rng rng(22);
    std::vector<double> xs(N);
    for (auto& x : xs) x = data::sample_beta(rng, c.a, c.b);
    std::sort(xs.begin(), xs.end());
    double d = 0;
    for (int i = 0; i < N; ++i) {
      const double f = c.cdf(xs[i]);
      d = std::max({d, f - double(i) / N, double(i + 1) / N - f});
    }
    EXPECT_LT(d, 1.95 / std::sqrt(double(N))) << "Beta(" << c.a << ", " << c.b << ")";
  }
}

TEST(Beta, TinyShapesStayFinite) {
  Rng rng(23);
  int low = 0;
  for (int i = 0; i < 10000; ++i) {
    const double x = data::sample_beta(rng, 0.01, 0.01);
    ASSERT_TRUE(x >= 0 && x <= 1) << x;
    low += x < 0.5;
  }
  EXPECT_NEAR(low / 10000.0, 0.5, kSigmas * std::sqrt(0.25 / 10000));  // symmetric
}

}  // namespace
}  // namespace gmlp
