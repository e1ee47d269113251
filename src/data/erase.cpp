#include "data/erase.h"

#include <cmath>

#include "core/error.h"

namespace gmlp::data {

bool random_erase(float* image, int C, int S, const EraseConfig& cfg, Rng& rng, PixelBox* box) {
  GMLP_CHECK(C > 0 && S > 0);
  if (!(cfg.prob >= 0 && cfg.prob <= 1)) fail("random erasing probability must lie in [0, 1], got ", cfg.prob);
  if (!cfg.enabled()) return false;
  // timm skips when random() > p; erasing when u < p has the same law and never erases at p = 0.
  if (!(rng.uniform() < cfg.prob)) return false;

  constexpr double kMinArea = 0.02, kMaxArea = 1.0 / 3.0, kMinAspect = 0.3;
  const double log_lo = std::log(kMinAspect), log_hi = std::log(1.0 / kMinAspect);
  const double area = double(S) * S;
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = rng.uniform(kMinArea, kMaxArea) * area;
    const double aspect = std::exp(rng.uniform(log_lo, log_hi));
    // Python's round() rounds half to even, as nearbyint does in the default rounding mode.
    const int h = int(std::nearbyint(std::sqrt(target_area * aspect)));
    const int w = int(std::nearbyint(std::sqrt(target_area / aspect)));
    if (h < S && w < S) {
      const int top = int(rng.below(uint64_t(S - h + 1)));
      const int left = int(rng.below(uint64_t(S - w + 1)));
      for (int c = 0; c < C; ++c)
        for (int y = top; y < top + h; ++y) {
          float* row = image + (int64_t(c) * S + y) * S;
          for (int x = left; x < left + w; ++x) row[x] = float(rng.normal());
        }
      if (box) *box = PixelBox{top, top + h, left, left + w};
      return true;
    }
  }
  return false;
}

}  // namespace gmlp::data
