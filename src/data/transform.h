// Turning stored uint8 images into model inputs: scaling to [0, 1], per-channel normalisation
// (timm's gMLP default mean = std = 0.5), and the training augmentation (random crop with zero
// padding, as torchvision's RandomCrop(S, padding=p), then a random horizontal flip).
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace gmlp::data {

struct Normalization {
  std::vector<float> mean, std;  // one per channel
  static Normalization gmlp_default(int channels) {
    return {std::vector<float>(channels, 0.5f), std::vector<float>(channels, 0.5f)};
  }
};

struct Augment {
  int crop_padding = 0;  // shift by up to ±p pixels, filling with 0 (black)
  bool hflip = false;
};

// dst: (C, S, S) floats; src: (C, S, S) uint8. (x/255 - mean[c]) / std[c].
void normalize_image(float* dst, const uint8_t* src, int C, int S, const Normalization& norm);
// The same, for floats already in [0, 1] (decoded image files).
void normalize_image(float* dst, const float* src, int C, int S, const Normalization& norm);
// Augments then normalises one image; draws from rng.
void augment_image(float* dst, const uint8_t* src, int C, int S, const Normalization& norm, const Augment& aug,
                   Rng& rng);

}  // namespace gmlp::data
