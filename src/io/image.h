// Image files for inference and inspection: PNG/JPEG decoding with stb_image, resizing with
// stb_image_resize, PNG encoding with stb_image_write (nothings/stb).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gmlp::img {

// Loads a PNG or JPEG as CHW floats in [0, 1]: (channels, height, width). channels is 1 (gray;
// color images become ITU-R 601 luma 0.299 R + 0.587 G + 0.114 B) or 3 (RGB; gray is
// replicated). Alpha is dropped. The image is resized to height x width when its size differs.
std::vector<float> load_image(const std::string& path, int channels, int height, int width);

// Writes 8-bit pixels, (height, width, channels) with channels 1 to 4, as PNG, atomically.
void write_png(const std::string& path, int width, int height, int channels, const uint8_t* hwc);

}  // namespace gmlp::img
