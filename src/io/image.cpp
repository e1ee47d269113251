// Image decoding, resizing and PNG encoding on top of nothings/stb (stb_image, stb_image_resize,
// stb_image_write; implementations come from libstb). The file is read with read_file so its
// size is capped, and the decoded size is checked with stbi_info before pixels are allocated.
#include "io/image.h"

#include <stb/stb_image.h>
#include <stb/stb_image_resize.h>
#include <stb/stb_image_write.h>

#include <algorithm>
#include <climits>
#include <memory>

#include "core/error.h"
#include "io/atomic_file.h"

namespace gmlp::img {

namespace {

constexpr size_t kMaxFileBytes = size_t{1} << 28;  // 256 MiB
constexpr int kMaxSide = 8192;                     // caps a decoded image at 64 Mpixel

template <class... Args>
[[noreturn]] void bad(const std::string& path, Args&&... args) {
  fail("failed to load image '", path, "': ", std::forward<Args>(args)...);
}

}  // namespace

std::vector<float> load_image(const std::string& path, int channels, int height, int width) {
  if (channels != 1 && channels != 3) bad(path, "channels must be 1 or 3 (got ", channels, ")");
  if (height < 1 || width < 1 || height > kMaxSide || width > kMaxSide)
    bad(path, "requested size ", height, "x", width, " is outside 1..", kMaxSide);
  const std::string bytes = read_file(path, kMaxFileBytes);
  const auto* buf = reinterpret_cast<const stbi_uc*>(bytes.data());
  const int len = static_cast<int>(bytes.size());  // <= 256 MiB, fits

  int w = 0, h = 0, n = 0;
  if (!stbi_info_from_memory(buf, len, &w, &h, &n))
    bad(path, "cannot decode it (stb_image: ", stbi_failure_reason(), ")");
  if (w > kMaxSide || h > kMaxSide)
    bad(path, "the image is ", w, "x", h, ", larger than the ", kMaxSide, "x", kMaxSide, " limit");
  std::unique_ptr<stbi_uc, void (*)(void*)> px(stbi_load_from_memory(buf, len, &w, &h, &n, 0),
                                               stbi_image_free);
  if (!px) bad(path, "cannot decode it (stb_image: ", stbi_failure_reason(), ")");

  // Convert to `channels` floats in [0, 1], HWC; n is 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA.
  const size_t pixels = size_t(w) * size_t(h);
  std::vector<float> hwc(pixels * channels);
  for (size_t i = 0; i < pixels; ++i) {
    const stbi_uc* p = px.get() + i * n;
    const bool color = n >= 3;
    if (channels == 1) {
      hwc[i] = color ? (0.299f * p[0] + 0.587f * p[1] + 0.114f * p[2]) / 255.0f : p[0] / 255.0f;
    } else {
      for (int c = 0; c < 3; ++c) hwc[i * 3 + c] = p[color ? c : 0] / 255.0f;
    }
  }

  if (w != width || h != height) {
    std::vector<float> resized(size_t(width) * height * channels);
    if (!stbir_resize_float(hwc.data(), w, h, 0, resized.data(), width, height, 0, channels))
      bad(path, "resizing from ", h, "x", w, " to ", height, "x", width, " failed");
    hwc.swap(resized);
  }

  // HWC -> CHW; the resampling filters can overshoot slightly, so clamp back into [0, 1].
  const size_t hw = size_t(width) * height;
  std::vector<float> chw(hw * channels);
  for (size_t i = 0; i < hw; ++i)
    for (int c = 0; c < channels; ++c)
      chw[c * hw + i] = std::clamp(hwc[i * channels + c], 0.0f, 1.0f);
  return chw;
}

void write_png(const std::string& path, int width, int height, int channels, const uint8_t* hwc) {
  if (channels < 1 || channels > 4 || width < 1 || height < 1 || width > kMaxSide ||
      height > kMaxSide)
    fail("failed to write image '", path, "': cannot encode ", width, "x", height, "x", channels,
         " as PNG (sides 1..", kMaxSide, ", channels 1..4)");
  GMLP_CHECK(hwc != nullptr);
  std::string png;
  auto append = [](void* ctx, void* data, int size) {
    static_cast<std::string*>(ctx)->append(static_cast<const char*>(data), size_t(size));
  };
  if (!stbi_write_png_to_func(append, &png, width, height, channels, hwc, width * channels))
    fail("failed to write image '", path, "': PNG encoding failed");
  write_file_atomic(path, png);
}

}  // namespace gmlp::img
