// Random erasing as timm.data.RandomErasing(probability=p, mode='pixel', max_count=1,
// device='cpu') on one normalised (C, S, S) image, the DeiT recipe's last augmentation:
//   with probability p, up to 10 attempts of
//     area   = U(0.02, 1/3)·S²,   aspect = exp(U(log 0.3, log 1/0.3)),
//     h = round(sqrt(area·aspect)),  w = round(sqrt(area/aspect))   (round half to even),
//     if h < S and w < S: top ~ U{0..S-h}, left ~ U{0..S-w}; fill the box with independent
//     N(0, 1) values per channel and pixel ('pixel' mode); stop.
// If all 10 attempts fail the image is left alone.
#pragma once

#include "core/rng.h"
#include "data/mix.h"  // PixelBox

namespace gmlp::data {

struct EraseConfig {
  float prob = 0.25f;  // chance to try erasing an image (timm RandomErasing probability / re_prob)
  bool enabled() const { return prob > 0.f; }
};

// Erases one box of `image` (C, S, S) in place. Returns whether a box was chosen (and, when
// `box` is not null, stores it there; it is left untouched otherwise). Draws nothing from rng
// when !cfg.enabled().
bool random_erase(float* image, int C, int S, const EraseConfig& cfg, Rng& rng, PixelBox* box = nullptr);

}  // namespace gmlp::data
