#include "ops/patch_embed.h"

#include <algorithm>

namespace gmlp {

template <class T>
void patchify(T* patches, const T* img, PatchShape s) {
  const int64_t G = s.grid(), P = s.P, S = s.S, PD = s.patch_dim();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < s.tokens(); ++n)
    for (int64_t b = 0; b < s.B; ++b) {
      const int64_t gy = n / G, gx = n % G;
      T* dst = patches + (n * s.B + b) * PD;
      for (int64_t c = 0; c < s.C; ++c)
        for (int64_t py = 0; py < P; ++py) {
          const T* src = img + ((b * s.C + c) * S + gy * P + py) * S + gx * P;
          std::copy(src, src + P, dst + (c * P + py) * P);
        }
    }
}

template <class T>
void patchify_ref(T* patches, const T* img, PatchShape s) {
  const int64_t G = s.grid(), P = s.P, S = s.S;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t c = 0; c < s.C; ++c)
      for (int64_t y = 0; y < S; ++y)
        for (int64_t x = 0; x < S; ++x) {
          const int64_t n = (y / P) * G + x / P;
          const int64_t k = (c * P + y % P) * P + x % P;
          patches[(n * s.B + b) * s.patch_dim() + k] = img[((b * s.C + c) * S + y) * S + x];
        }
}

template void patchify<float>(float*, const float*, PatchShape);
template void patchify<double>(double*, const double*, PatchShape);
template void patchify_ref<float>(float*, const float*, PatchShape);
template void patchify_ref<double>(double*, const double*, PatchShape);

}  // namespace gmlp
