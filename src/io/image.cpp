// Image decoding with libpng and libjpeg-turbo (and a bounds-checked PGM/PPM reader), resizing and
// PNG encoding with nothings/stb (stb_image_resize, stb_image_write; implementations from libstb).
// stb_image's decoders are not used: they are not hardened against hostile files. The file is
// read with read_file so its size is capped, and every decoder reads the header and checks the
// image's sides before the pixels are allocated.
//
// libpng and libjpeg report errors by calling a handler that must not return; ours longjmp back to
// the setjmp in decode_png_raw / decode_jpeg_raw, whose frames hold no C++ object with a destructor
// (everything that owns memory lives in the caller's Png/Jpeg state), so nothing is skipped.
#include "io/image.h"

#include <jerror.h>
#include <jpeglib.h>  // before jerror.h, which needs its types
#include <png.h>
#include <stb/stb_image_resize.h>
#include <stb/stb_image_write.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "io/atomic_file.h"

namespace gmlp::img {

namespace {

// libjpeg's working memory (progressive coefficients, buffers): ample for 8192 x 8192 x 3.
constexpr long kMaxJpegMemory = 1L << 30;
// A progressive JPEG may hold any number of scans, each a pass over the whole image; libjpeg-turbo
// suggests a limit like this one against files made to take minutes.
constexpr int kMaxJpegScans = 1000;

template <class... Args>
[[noreturn]] void bad(const std::string& path, Args&&... args) {
  fail("failed to load image '", path, "': ", std::forward<Args>(args)...);
}

void check_sides(const std::string& name, const char* format, size_t w, size_t h, int max_side) {
  if (w < 1 || h < 1 || w > size_t(max_side) || h > size_t(max_side))
    bad(name, "the ", format, " image is ", w, "x", h, ": expected sides 1..", max_side);
}

// --- PNG ----------------------------------------------------------------------------------------

struct Png {
  const uint8_t* data = nullptr;
  size_t size = 0, pos = 0;
  int max_side = 0;
  char message[200] = "";  // the error libpng (or a check of ours) gave
  bool too_large = false;
  png_uint_32 width = 0, height = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;
  std::vector<png_bytep> rows;
  std::jmp_buf jump;
};

void png_error_fn(png_structp png, png_const_charp msg) {
  auto* st = static_cast<Png*>(png_get_error_ptr(png));
  std::snprintf(st->message, sizeof st->message, "%s", msg ? msg : "unknown error");
  std::longjmp(st->jump, 1);
}

void png_warning_fn(png_structp, png_const_charp) {}  // benign; corrupt data is an error

void png_read_fn(png_structp png, png_bytep out, png_size_t n) {
  auto* st = static_cast<Png*>(png_get_io_ptr(png));
  if (n > st->size - st->pos) png_error(png, "the file ends early (truncated)");
  std::memcpy(out, st->data + st->pos, n);
  st->pos += n;
}

// Decodes into st; false (with st->message) on error. Only trivially destructible locals here.
bool decode_png_raw(Png* st) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, st, png_error_fn, png_warning_fn);
  if (!png) {
    std::snprintf(st->message, sizeof st->message, "out of memory");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (setjmp(st->jump)) {
    png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
    return false;
  }
  if (!info) png_error(png, "out of memory");
  png_set_read_fn(png, st, png_read_fn);
  // Ancillary chunks (text, ICC profiles...) are decompressed into at most this much memory.
  png_set_chunk_malloc_max(png, 64u << 20);
  png_read_info(png, info);
  int bit_depth = 0, color = 0, interlace = 0;
  png_get_IHDR(png, info, &st->width, &st->height, &bit_depth, &color, &interlace, nullptr, nullptr);
  // Checked here, before png_read_update_info allocates rows and this function the pixels.
  if (st->width > png_uint_32(st->max_side) || st->height > png_uint_32(st->max_side)) {
    st->too_large = true;
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  // To 8-bit gray or RGB, as stb_image did: 16-bit samples keep their high byte, 1/2/4-bit gray
  // is scaled to 0..255, palettes are expanded, alpha (and tRNS) is dropped; no gamma correction.
  if (bit_depth == 16) png_set_strip_16(png);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  png_set_strip_alpha(png);  // also the alpha that expanding a tRNS chunk adds
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  st->channels = png_get_channels(png, info);
  const size_t rowbytes = png_get_rowbytes(png, info);
  if ((st->channels != 1 && st->channels != 3) || rowbytes != size_t(st->width) * st->channels)
    png_error(png, "unexpected layout after conversion to 8-bit gray or RGB");
  st->pixels.resize(rowbytes * st->height);
  st->rows.resize(st->height);
  for (png_uint_32 y = 0; y < st->height; ++y) st->rows[y] = st->pixels.data() + y * rowbytes;
  png_read_image(png, st->rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

// libpng 1.6.39 allocates a text chunk's declared length before it reads the chunk, whatever
// png_set_chunk_malloc_max says: a 175-byte file whose zTXt chunk declares 1.9 GB made it ask
// for 1.9 GB (fuzz_image). So every chunk's declared length is first checked against the bytes
// that follow it, which bounds what libpng can be asked to allocate by the file's size.
void check_png_chunks(const std::string& name, const uint8_t* data, size_t size) {
  for (size_t pos = 8; pos + 8 <= size;) {  // after the signature, which libpng checks
    const uint32_t length =
        uint32_t(data[pos]) << 24 | uint32_t(data[pos + 1]) << 16 | uint32_t(data[pos + 2]) << 8 | data[pos + 3];
    char type[5] = {};
    for (int i = 0; i < 4; ++i) {
      const uint8_t c = data[pos + 4 + size_t(i)];
      type[i] = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ? char(c) : '?';
    }
    const uint64_t left = size - pos - 8;  // the data and the CRC must fit here
    if (uint64_t(length) + 4 > left)
      bad(name, "cannot decode it as PNG: its chunk '", type, "' at byte ", pos, " declares ", length,
          " bytes of data, but only ", left, " bytes follow (truncated or corrupt)");
    if (std::memcmp(type, "IEND", 4) == 0) break;
    pos += 12 + size_t(length);
  }
}

Pixels decode_png(const std::string& name, const uint8_t* data, size_t size, int max_side) {
  check_png_chunks(name, data, size);
  auto st = std::make_unique<Png>();
  st->data = data, st->size = size, st->max_side = max_side;
  if (!decode_png_raw(st.get())) {
    if (st->too_large) check_sides(name, "PNG", st->width, st->height, max_side);
    bad(name, "cannot decode it as PNG (libpng: ", st->message, ")");
  }
  return Pixels{int(st->width), int(st->height), st->channels, std::move(st->pixels)};
}

// --- JPEG ---------------------------------------------------------------------------------------

struct Jpeg {
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr err;
  jpeg_progress_mgr progress;
  int max_side = 0;
  char message[JMSG_LENGTH_MAX] = "";
  bool too_large = false;
  int channels = 0;  // of the output: 1, 3, or 4 (CMYK, converted to RGB afterwards)
  std::vector<uint8_t> pixels;
  std::jmp_buf jump;
};

void jpeg_error_exit(j_common_ptr cinfo) {
  auto* st = reinterpret_cast<Jpeg*>(cinfo->client_data);
  (*cinfo->err->format_message)(cinfo, st->message);
  std::longjmp(st->jump, 1);
}

// Warnings (level -1) are corrupt data libjpeg works around; the end of the file arriving early is
// an error here (libjpeg would fill the rest of the image with gray). Trace messages are dropped.
void jpeg_emit_message(j_common_ptr cinfo, int level) {
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) jpeg_error_exit(cinfo);
}

void jpeg_output_message(j_common_ptr) {}

void jpeg_progress(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->is_decompressor && d->input_scan_number > kMaxJpegScans) {
    auto* st = reinterpret_cast<Jpeg*>(cinfo->client_data);
    std::snprintf(st->message, sizeof st->message, "more than %d scans", kMaxJpegScans);
    std::longjmp(st->jump, 1);
  }
}

bool decode_jpeg_raw(Jpeg* st, const uint8_t* data, size_t size) {
  j_decompress_ptr cinfo = &st->cinfo;
  cinfo->err = jpeg_std_error(&st->err);
  st->err.error_exit = jpeg_error_exit;
  st->err.emit_message = jpeg_emit_message;
  st->err.output_message = jpeg_output_message;
  cinfo->client_data = st;
  if (setjmp(st->jump)) {
    jpeg_destroy_decompress(cinfo);
    return false;
  }
  jpeg_create_decompress(cinfo);
  cinfo->mem->max_memory_to_use = kMaxJpegMemory;
  st->progress.progress_monitor = jpeg_progress;
  cinfo->progress = &st->progress;
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  if (cinfo->image_width > JDIMENSION(st->max_side) || cinfo->image_height > JDIMENSION(st->max_side)) {
    st->too_large = true;
    jpeg_destroy_decompress(cinfo);
    return false;
  }
  switch (cinfo->jpeg_color_space) {
    case JCS_GRAYSCALE: cinfo->out_color_space = JCS_GRAYSCALE; break;
    case JCS_CMYK:
    case JCS_YCCK: cinfo->out_color_space = JCS_CMYK; break;
    default: cinfo->out_color_space = JCS_RGB; break;
  }
  jpeg_start_decompress(cinfo);
  st->channels = cinfo->output_components;
  const size_t stride = size_t(cinfo->output_width) * st->channels;
  st->pixels.resize(stride * cinfo->output_height);
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = st->pixels.data() + size_t(cinfo->output_scanline) * stride;
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_decompress(cinfo);
  jpeg_destroy_decompress(cinfo);
  return true;
}

Pixels decode_jpeg(const std::string& name, const uint8_t* data, size_t size, int max_side) {
  auto st = std::make_unique<Jpeg>();
  st->max_side = max_side;
  if (!decode_jpeg_raw(st.get(), data, size)) {
    if (st->too_large) check_sides(name, "JPEG", st->cinfo.image_width, st->cinfo.image_height, max_side);
    bad(name, "cannot decode it as JPEG (libjpeg: ", st->message, ")");
  }
  Pixels out{int(st->cinfo.output_width), int(st->cinfo.output_height), st->channels, {}};
  if (st->channels == 4) {
    // CMYK as Adobe writes it (inverted: 255 is no ink), and YCCK, which libjpeg turns into the
    // same: R = C * K / 255 and so on, rounded as stb_image did.
    const size_t pixels = size_t(out.width) * out.height;
    out.channels = 3;
    out.hwc.resize(pixels * 3);
    for (size_t i = 0; i < pixels; ++i) {
      const uint8_t* p = st->pixels.data() + i * 4;
      for (int c = 0; c < 3; ++c) {
        const unsigned t = unsigned(p[c]) * p[3] + 128;
        out.hwc[i * 3 + c] = uint8_t((t + (t >> 8)) >> 8);
      }
    }
  } else if (st->channels == 1 || st->channels == 3) {
    out.hwc = std::move(st->pixels);
  } else {
    bad(name, "cannot decode it as JPEG: ", st->channels, " components, expected 1, 3 or 4");
  }
  return out;
}

// --- PGM / PPM (binary, P5 / P6) -----------------------------------------------------------------

Pixels decode_pnm(const std::string& name, const uint8_t* data, size_t size, int max_side) {
  size_t pos = 2;  // after "P5" / "P6"
  // The header's three numbers, each after whitespace and '#' comments.
  auto number = [&](const char* what) -> size_t {
    for (;;) {
      while (pos < size && std::strchr(" \t\r\n\v\f", data[pos]) && data[pos]) ++pos;
      if (pos < size && data[pos] == '#') {
        while (pos < size && data[pos] != '\n' && data[pos] != '\r') ++pos;
        continue;
      }
      break;
    }
    if (pos >= size || data[pos] < '0' || data[pos] > '9')
      bad(name, "cannot decode it as PGM/PPM: expected the ", what, " in its header, found ",
          pos >= size ? "the end of the file" : "another character");
    size_t v = 0;
    while (pos < size && data[pos] >= '0' && data[pos] <= '9') {
      v = v * 10 + size_t(data[pos++] - '0');
      if (v > 1'000'000) bad(name, "cannot decode it as PGM/PPM: its ", what, " is too large");
    }
    return v;
  };
  const int channels = data[1] == '5' ? 1 : 3;
  const size_t w = number("width"), h = number("height"), maxval = number("maximum value");
  check_sides(name, channels == 1 ? "PGM" : "PPM", w, h, max_side);
  if (maxval < 1 || maxval > 65535)
    bad(name, "cannot decode it as PGM/PPM: maximum value ", maxval, ", expected 1..65535");
  if (pos >= size || !std::strchr(" \t\r\n\v\f", data[pos]) || !data[pos])
    bad(name, "cannot decode it as PGM/PPM: expected whitespace after the maximum value");
  ++pos;
  const size_t samples = w * h * channels, bytes = samples * (maxval > 255 ? 2 : 1);
  if (size - pos < bytes)
    bad(name, "cannot decode it as PGM/PPM: ", w, "x", h, " pixels need ", bytes, " bytes of samples, the file has ",
        size - pos);
  Pixels out{int(w), int(h), channels, std::vector<uint8_t>(samples)};
  const uint8_t* s = data + pos;
  for (size_t i = 0; i < samples; ++i) {
    // Samples above maxval are clamped. 255 and 65535 are read as PNG's 8 and 16 bits are (the
    // high byte of 16); any other maxval is scaled to 0..255, rounded.
    const size_t v = std::min(maxval > 255 ? size_t(s[2 * i]) << 8 | s[2 * i + 1] : size_t(s[i]), maxval);
    out.hwc[i] = uint8_t(maxval == 255 ? v : maxval == 65535 ? v >> 8 : (v * 255 + maxval / 2) / maxval);
  }
  return out;
}

}  // namespace

Pixels decode_image(const std::string& name, const uint8_t* data, size_t size, int max_side) {
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 8 && std::memcmp(data, kPng, 8) == 0) return decode_png(name, data, size, max_side);
  if (size >= 2 && data[0] == 0xff && data[1] == 0xd8) return decode_jpeg(name, data, size, max_side);
  if (size >= 3 && data[0] == 'P' && (data[1] == '5' || data[1] == '6')) return decode_pnm(name, data, size, max_side);
  std::string start;
  for (size_t i = 0; i < std::min<size_t>(size, 4); ++i)
    start += cat(i ? " " : "", "0123456789abcdef"[data[i] >> 4], "0123456789abcdef"[data[i] & 15]);
  bad(name, "unknown image format: expected PNG, JPEG or binary PGM/PPM (P5/P6), found ",
      size == 0 ? "an empty file" : "bytes " + start + (size > 4 ? " ..." : ""));
}

std::vector<float> load_image(const std::string& path, int channels, int height, int width) {
  if (channels != 1 && channels != 3) bad(path, "channels must be 1 or 3 (got ", channels, ")");
  if (height < 1 || width < 1 || height > kMaxSide || width > kMaxSide)
    bad(path, "requested size ", height, "x", width, " is outside 1..", kMaxSide);
  const std::string bytes = read_file(path, kMaxFileBytes);
  return image_input(path, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), channels, height, width);
}

std::vector<float> image_input(const std::string& path, const uint8_t* data, size_t size, int channels, int height,
                               int width) {
  if (channels != 1 && channels != 3) bad(path, "channels must be 1 or 3 (got ", channels, ")");
  if (height < 1 || width < 1 || height > kMaxSide || width > kMaxSide)
    bad(path, "requested size ", height, "x", width, " is outside 1..", kMaxSide);
  const Pixels px = decode_image(path, data, size);
  const int w = px.width, h = px.height, n = px.channels;

  // Convert to `channels` floats in [0, 1], HWC; n is 1 (gray) or 3 (RGB).
  const size_t pixels = size_t(w) * size_t(h);
  std::vector<float> hwc(pixels * channels);
  for (size_t i = 0; i < pixels; ++i) {
    const uint8_t* p = px.hwc.data() + i * n;
    const bool color = n == 3;
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
    for (int c = 0; c < channels; ++c) chw[c * hw + i] = std::clamp(hwc[i * channels + c], 0.0f, 1.0f);
  return chw;
}

std::vector<float> resize_chw(const float* chw, int channels, int height, int width, int h2, int w2) {
  std::vector<float> out(size_t(channels) * h2 * w2);
  for (int c = 0; c < channels; ++c) {
    float* o = out.data() + size_t(c) * h2 * w2;
    if (!stbir_resize_float(chw + size_t(c) * height * width, width, height, 0, o, w2, h2, 0, 1))
      throw std::runtime_error(cat("resizing from ", height, "x", width, " to ", h2, "x", w2, " failed"));
    for (size_t i = 0; i < size_t(h2) * w2; ++i) o[i] = std::clamp(o[i], 0.0f, 1.0f);
  }
  return out;
}

void write_png(const std::string& path, int width, int height, int channels, const uint8_t* hwc) {
  if (channels < 1 || channels > 4 || width < 1 || height < 1 || width > kMaxSide || height > kMaxSide)
    fail("failed to write image '", path, "': cannot encode ", width, "x", height, "x", channels, " as PNG (sides 1..",
         kMaxSide, ", channels 1..4)");
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
