// Mixup and CutMix as timm.data.Mixup in its default 'batch' mode (one λ for the whole batch),
// plus the Gamma/Beta samplers they need. Sample i is paired with sample B-1-i (timm's
// x.flip(0)); with an odd B the middle sample is paired with itself.
//
// One call of mix_batch, drawing from rng in timm's order:
//   1. u < prob ? mix : leave the batch alone (λ = 1);
//   2. both alphas > 0: CutMix with probability switch_prob, else Mixup; one alpha > 0: that one;
//   3. λ ~ Beta(α, α) for the chosen mode (if λ == 1 exactly, nothing is mixed, as in timm);
//   4. Mixup:  x_i = λ·x_i + (1-λ)·x_{B-1-i} on every pixel;
//      CutMix: a box (timm rand_bbox: side int(S·sqrt(1-λ)), centre uniform, clipped to the
//              image) is pasted from the partner, and λ becomes 1 - box_area / S² (correct_lam);
//   5. targets = λ·smooth_one_hot(y) + (1-λ)·smooth_one_hot(y.flip(0)).
// Images are (B, C, S, S) floats, already normalised; they are mixed in place.
#pragma once

#include <cstdint>

#include "core/rng.h"

namespace gmlp::data {

struct MixConfig {
  float mixup_alpha = 0.8f;   // Beta(α, α) for Mixup's λ; 0 disables Mixup
  float cutmix_alpha = 1.0f;  // Beta(α, α) for CutMix's λ; 0 disables CutMix
  float prob = 1.0f;          // chance that a batch is mixed at all (timm mix_prob)
  float switch_prob = 0.5f;   // chance of CutMix rather than Mixup when both are enabled
  float smoothing = 0.1f;     // label smoothing of the soft targets (timm label_smoothing)
  // Whether mix_batch can ever mix. A disabled config still gets smoothed one-hot targets and
  // draws nothing from the rng.
  bool enabled() const { return prob > 0.f && (mixup_alpha > 0.f || cutmix_alpha > 0.f); }
};

enum class MixMode { kNone, kMixup, kCutmix };
const char* mix_mode_name(MixMode mode);  // "none", "mixup", "cutmix"

// A half-open pixel box rows [y0, y1) × columns [x0, x1); empty when y0 == y1 or x0 == x1.
struct PixelBox {
  int y0 = 0, y1 = 0, x0 = 0, x1 = 0;
  int area() const { return (y1 - y0) * (x1 - x0); }
};

// What one call did: the mode, the λ the targets were built with (after CutMix's area
// correction) and, for CutMix, the pasted box.
struct MixResult {
  MixMode mode = MixMode::kNone;
  double lam = 1.0;
  PixelBox box;
};

// The whole timm Mixup.__call__ for one batch: draws the mode and λ from rng, mixes `images`
// (B, C, S, S) in place and writes soft targets (B, K) from `labels` (B). Returns what it did.
MixResult mix_batch(float* images, int B, int C, int S, float* targets, const int32_t* labels, int K,
                    const MixConfig& cfg, Rng& rng);

// The same with the mode and λ given (steps 4-5 only): deterministic for kNone and kMixup; for
// kCutmix the box centre still comes from rng and the returned λ is the corrected one. λ in [0, 1].
MixResult apply_mix(float* images, int B, int C, int S, float* targets, const int32_t* labels, int K, MixMode mode,
                    double lam, float smoothing, Rng& rng);

// The building blocks.
// x_i = float(λ)·x_i + float(1-λ)·x_{B-1-i} for all i at once (timm: x.mul_(λ).add_(x.flip(0)·(1-λ))).
void mixup_images(float* images, int B, int C, int S, double lam);
// Swaps `box` between sample i and B-1-i (timm: x[..., box] = x.flip(0)[..., box]).
void cutmix_images(float* images, int B, int C, int S, const PixelBox& box);
// timm rand_bbox for a square S×S image: cut = int(S·sqrt(1-λ)); centre (cy, cx) uniform in
// [0, S)², drawn cy first; box = [c - cut/2, c + cut/2) clipped to [0, S] (integer cut/2, so an
// unclipped side is 2·(cut/2) long, as in timm).
PixelBox cutmix_box(int S, double lam, Rng& rng);
// targets (B, K) = λ·smooth_one_hot(labels) + (1-λ)·smooth_one_hot(labels.flip(0)).
void mix_targets(float* targets, const int32_t* labels, int B, int K, double lam, float smoothing);

// Gamma(shape, 1) by Marsaglia & Tsang (2000); shape < 1 by the boost Gamma(shape+1)·U^(1/shape).
// shape > 0.
double sample_gamma(Rng& rng, double shape);
// Beta(a, b) = X / (X + Y) with X ~ Gamma(a), Y ~ Gamma(b), computed in log space so that tiny
// shapes do not give 0/0. a, b > 0.
double sample_beta(Rng& rng, double a, double b);

}  // namespace gmlp::data
