#include "data/transform.h"

namespace gmlp::data {

void normalize_image(float* dst, const uint8_t* src, int C, int S, const Normalization& norm) {
  for (int c = 0; c < C; ++c) {
    const float scale = 1.f / (255.f * norm.std[c]), shift = norm.mean[c] / norm.std[c];
    for (int i = 0; i < S * S; ++i) dst[c * S * S + i] = float(src[c * S * S + i]) * scale - shift;
  }
}

void normalize_image(float* dst, const float* src, int C, int S, const Normalization& norm) {
  for (int c = 0; c < C; ++c)
    for (int i = 0; i < S * S; ++i) dst[c * S * S + i] = (src[c * S * S + i] - norm.mean[c]) / norm.std[c];
}

void augment_image(float* dst, const uint8_t* src, int C, int S, const Normalization& norm, const Augment& aug,
                   Rng& rng) {
  const int p = aug.crop_padding;
  const int dy = p > 0 ? int(rng.below(2 * p + 1)) - p : 0;
  const int dx = p > 0 ? int(rng.below(2 * p + 1)) - p : 0;
  const bool flip = aug.hflip && rng.uniform() < 0.5;
  for (int c = 0; c < C; ++c) {
    const float scale = 1.f / (255.f * norm.std[c]), shift = norm.mean[c] / norm.std[c];
    for (int y = 0; y < S; ++y)
      for (int x = 0; x < S; ++x) {
        const int sy = y + dy, sx0 = x + dx, sx = flip ? S - 1 - sx0 : sx0;
        const bool inside = sy >= 0 && sy < S && sx0 >= 0 && sx0 < S;
        const float v = inside ? float(src[(c * S + sy) * S + sx]) : 0.f;
        dst[(c * S + y) * S + x] = v * scale - shift;
      }
  }
}

}  // namespace gmlp::data
