#include "data/mix.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/threads.h"

namespace gmlp::data {
namespace {

// log of a Gamma(shape, 1) draw (shape > 0). Marsaglia & Tsang, "A simple method for generating
// gamma variables" (2000): for shape >= 1, d = shape - 1/3, c = 1/sqrt(9d), x ~ N(0, 1),
// v = (1 + c·x)³, accept d·v when u < 1 - 0.0331·x⁴ or log u < x²/2 + d·(1 - v + log v).
// For shape < 1, Gamma(shape) = Gamma(shape + 1)·U^(1/shape), whose log never underflows.
double log_gamma_draw(Rng& rng, double shape) {
  GMLP_CHECK(shape > 0);
  double boost = 0;
  if (shape < 1) {
    double u = rng.uniform();
    while (u <= 0) u = rng.uniform();
    boost = std::log(u) / shape;
    shape += 1;
  }
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = rng.normal();
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = rng.uniform(), x2 = x * x;
    if (u < 1.0 - 0.0331 * x2 * x2 || std::log(u) < 0.5 * x2 + d * (1.0 - v + std::log(v)))
      return std::log(d) + std::log(v) + boost;
  }
}

void check_shapes(int B, int C, int S, int K) { GMLP_CHECK(B > 0 && C > 0 && S > 0 && K > 0); }

}  // namespace

const char* mix_mode_name(MixMode mode) {
  switch (mode) {
    case MixMode::kMixup: return "mixup";
    case MixMode::kCutmix: return "cutmix";
    case MixMode::kNone: break;
  }
  return "none";
}

double sample_gamma(Rng& rng, double shape) { return std::exp(log_gamma_draw(rng, shape)); }

double sample_beta(Rng& rng, double a, double b) {
  const double lx = log_gamma_draw(rng, a), ly = log_gamma_draw(rng, b);
  return 1.0 / (1.0 + std::exp(ly - lx));  // X / (X + Y)
}

void mixup_images(float* images, int B, int C, int S, double lam) {
  GMLP_CHECK(B > 0 && lam >= 0 && lam <= 1);
  const int64_t n = int64_t(C) * S * S;
  const float a = float(lam), b = float(1.0 - lam);
  parallel_for_if(int64_t(B) * n >= (int64_t(1) << 18), (B + 1) / 2, [&](int64_t i) {
    float* xi = images + i * n;
    float* xj = images + int64_t(B - 1 - i) * n;
    for (int64_t p = 0; p < n; ++p) {
      const float vi = xi[p], vj = xj[p];
      xi[p] = a * vi + b * vj;
      xj[p] = a * vj + b * vi;  // for the middle of an odd batch, xj == xi: same value again
    }
  });
}

void cutmix_images(float* images, int B, int C, int S, const PixelBox& box) {
  GMLP_CHECK(B > 0 && 0 <= box.y0 && box.y0 <= box.y1 && box.y1 <= S && 0 <= box.x0 && box.x0 <= box.x1 && box.x1 <= S);
  const int64_t n = int64_t(C) * S * S;
  for (int i = 0; i < B / 2; ++i) {  // an odd batch's middle sample would swap with itself
    float* xi = images + int64_t(i) * n;
    float* xj = images + int64_t(B - 1 - i) * n;
    for (int c = 0; c < C; ++c)
      for (int y = box.y0; y < box.y1; ++y) {
        const int64_t row = (int64_t(c) * S + y) * S;
        std::swap_ranges(xi + row + box.x0, xi + row + box.x1, xj + row + box.x0);
      }
  }
}

PixelBox cutmix_box(int S, double lam, Rng& rng) {
  GMLP_CHECK(S > 0 && lam >= 0 && lam <= 1);
  const int cut = int(S * std::sqrt(1.0 - lam));  // timm: int(img_h * ratio), truncation
  const int cy = int(rng.below(uint64_t(S))), cx = int(rng.below(uint64_t(S)));
  PixelBox box;
  box.y0 = std::clamp(cy - cut / 2, 0, S);
  box.y1 = std::clamp(cy + cut / 2, 0, S);
  box.x0 = std::clamp(cx - cut / 2, 0, S);
  box.x1 = std::clamp(cx + cut / 2, 0, S);
  return box;
}

void mix_targets(float* targets, const int32_t* labels, int B, int K, double lam, float smoothing) {
  GMLP_CHECK(B > 0 && K > 0 && lam >= 0 && lam <= 1);
  const double off = double(smoothing) / K, on = 1.0 - double(smoothing) + off;
  for (int b = 0; b < B; ++b) {
    const int32_t y1 = labels[b], y2 = labels[B - 1 - b];
    GMLP_CHECK(y1 >= 0 && y1 < K && y2 >= 0 && y2 < K);
    float* t = targets + int64_t(b) * K;
    for (int k = 0; k < K; ++k) t[k] = float((k == y1 ? on : off) * lam + (k == y2 ? on : off) * (1.0 - lam));
  }
}

MixResult apply_mix(float* images, int B, int C, int S, float* targets, const int32_t* labels, int K, MixMode mode,
                    double lam, float smoothing, Rng& rng) {
  check_shapes(B, C, S, K);
  GMLP_CHECK(lam >= 0 && lam <= 1);
  MixResult r;
  r.mode = mode;
  switch (mode) {
    case MixMode::kNone: r.lam = 1.0; break;
    case MixMode::kMixup:
      r.lam = lam;
      mixup_images(images, B, C, S, lam);
      break;
    case MixMode::kCutmix:
      r.box = cutmix_box(S, lam, rng);
      r.lam = 1.0 - double(r.box.area()) / (double(S) * S);  // timm correct_lam
      cutmix_images(images, B, C, S, r.box);
      break;
  }
  mix_targets(targets, labels, B, K, r.lam, smoothing);
  return r;
}

MixResult mix_batch(float* images, int B, int C, int S, float* targets, const int32_t* labels, int K,
                    const MixConfig& cfg, Rng& rng) {
  check_shapes(B, C, S, K);
  if (!(cfg.mixup_alpha >= 0 && cfg.cutmix_alpha >= 0))
    fail("mixup and cutmix alphas must be >= 0, got ", cfg.mixup_alpha, " and ", cfg.cutmix_alpha);
  if (!(cfg.prob >= 0 && cfg.prob <= 1 && cfg.switch_prob >= 0 && cfg.switch_prob <= 1))
    fail("mix probabilities must lie in [0, 1], got prob ", cfg.prob, " and switch_prob ", cfg.switch_prob);
  if (!(cfg.smoothing >= 0 && cfg.smoothing < 1)) fail("label smoothing must lie in [0, 1), got ", cfg.smoothing);

  MixMode mode = MixMode::kNone;
  double lam = 1.0;
  // timm Mixup._params_per_batch
  if (cfg.enabled() && rng.uniform() < cfg.prob) {
    double alpha;
    if (cfg.mixup_alpha > 0 && cfg.cutmix_alpha > 0) {
      const bool cut = rng.uniform() < cfg.switch_prob;
      mode = cut ? MixMode::kCutmix : MixMode::kMixup;
      alpha = cut ? cfg.cutmix_alpha : cfg.mixup_alpha;
    } else if (cfg.mixup_alpha > 0) {
      mode = MixMode::kMixup;
      alpha = cfg.mixup_alpha;
    } else {
      mode = MixMode::kCutmix;
      alpha = cfg.cutmix_alpha;
    }
    lam = sample_beta(rng, alpha, alpha);
    if (lam == 1.0) mode = MixMode::kNone;  // timm _mix_batch: `if lam == 1.: return 1.`
  }
  return apply_mix(images, B, C, S, targets, labels, K, mode, lam, cfg.smoothing, rng);
}

}  // namespace gmlp::data
