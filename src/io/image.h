// Image files for inference and inspection: PNG decoding with libpng, JPEG with libjpeg-turbo,
// binary PGM/PPM with a small reader of its own; resizing with stb_image_resize and PNG encoding
// with stb_image_write (nothings/stb). Every decoder is given the image's bytes in memory, reads
// the header first and refuses an image larger than the side limit before any pixel is decoded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gmlp::img {

// The largest side accepted (a decoded image is at most 64 Mpixel) and the largest file read.
constexpr int kMaxSide = 8192;
constexpr size_t kMaxFileBytes = size_t{1} << 28;  // 256 MiB

// Decoded 8-bit pixels, (height, width, channels) with channels 1 (gray) or 3 (RGB); alpha is
// dropped, 16-bit samples keep their high byte, palettes are expanded.
struct Pixels {
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> hwc;
};

// Decodes a PNG, JPEG or binary PGM/PPM (P5/P6) held in memory; name is the file named in errors.
// Throws a one-line std::runtime_error on anything else, on corrupt data, and on a side above
// max_side (checked from the header, before the pixels are allocated).
Pixels decode_image(const std::string& name, const uint8_t* data, size_t size, int max_side = kMaxSide);

// Loads a PNG, JPEG or binary PGM/PPM as CHW floats in [0, 1]: (channels, height, width).
// channels is 1 (gray; color images become ITU-R 601 luma 0.299 R + 0.587 G + 0.114 B) or 3
// (RGB; gray is replicated). Alpha is dropped. The image is resized to height x width when its
// size differs.
std::vector<float> load_image(const std::string& path, int channels, int height, int width);
// The same for an image's bytes held in memory (a request's body); name is what errors call it.
std::vector<float> image_input(const std::string& name, const uint8_t* data, size_t size, int channels, int height,
                               int width);

// Resizes CHW floats in [0, 1] from height x width to h2 x w2 with load_image's filter, each
// channel on its own, clamped back into [0, 1].
std::vector<float> resize_chw(const float* chw, int channels, int height, int width, int h2, int w2);

// Writes 8-bit pixels, (height, width, channels) with channels 1 to 4, as PNG, atomically.
void write_png(const std::string& path, int width, int height, int channels, const uint8_t* hwc);

}  // namespace gmlp::img
