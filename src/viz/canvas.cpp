#include "viz/canvas.h"

#include <algorithm>
#include <cmath>

#include "io/image.h"

// stb_easy_font is header-only with static functions.
#include <stb/stb_easy_font.h>

namespace gmlp::viz {

Rgb diverging(double v) {
  v = std::clamp(v, -1.0, 1.0);
  const Rgb hot{178, 24, 43}, cold{33, 102, 172}, white{247, 247, 247};
  const Rgb end = v >= 0 ? hot : cold;
  const double t = std::abs(v);
  auto mix = [t](uint8_t a, uint8_t b) { return uint8_t(std::lround(a + (double(b) - a) * t)); };
  return {mix(white.r, end.r), mix(white.g, end.g), mix(white.b, end.b)};
}

Canvas::Canvas(int width, int height, Rgb background) : w_(width), h_(height), px_(size_t(width) * height * 3) {
  fill_rect(0, 0, width, height, background);
}

Rgb Canvas::at(int x, int y) const {
  const uint8_t* p = &px_[(size_t(y) * w_ + x) * 3];
  return {p[0], p[1], p[2]};
}

void Canvas::fill_rect(int x0, int y0, int x1, int y1, Rgb c) {
  x0 = std::max(x0, 0), y0 = std::max(y0, 0), x1 = std::min(x1, w_), y1 = std::min(y1, h_);
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x) {
      uint8_t* p = &px_[(size_t(y) * w_ + x) * 3];
      p[0] = c.r, p[1] = c.g, p[2] = c.b;
    }
}

void Canvas::line(double x0, double y0, double x1, double y1, Rgb c, int thickness) {
  const int steps = int(std::ceil(std::max(std::abs(x1 - x0), std::abs(y1 - y0)))) + 1;
  const int lo = -(thickness - 1) / 2, hi = thickness / 2 + 1;
  for (int i = 0; i <= steps; ++i) {
    const double t = double(i) / steps;
    const int x = int(std::lround(x0 + (x1 - x0) * t)), y = int(std::lround(y0 + (y1 - y0) * t));
    fill_rect(x + lo, y + lo, x + hi, y + hi, c);
  }
}

void Canvas::text(int x, int y, const std::string& s, Rgb c, int scale) {
  std::vector<char> buf(s.begin(), s.end());
  buf.push_back('\0');
  std::vector<float> quads(std::max<size_t>(s.size(), 1) * 4 * 4 * 70);  // ≤ 70 quads a glyph
  const int n = stb_easy_font_print(0, 0, buf.data(), nullptr, quads.data(), int(quads.size() * sizeof(float)));
  // Each vertex is x, y, z (floats) and 4 colour bytes: 4 floats; a quad is 4 vertices.
  for (int q = 0; q < n; ++q) {
    const float* v = &quads[size_t(q) * 16];
    const int qx0 = int(v[0]), qy0 = int(v[1]), qx1 = int(v[8]), qy1 = int(v[9]);
    fill_rect(x + qx0 * scale, y + qy0 * scale, x + qx1 * scale, y + qy1 * scale, c);
  }
}

int Canvas::text_width(const std::string& s, int scale) {
  std::vector<char> buf(s.begin(), s.end());
  buf.push_back('\0');
  return stb_easy_font_width(buf.data()) * scale;
}

void Canvas::save_png(const std::string& path) const { img::write_png(path, w_, h_, 3, px_.data()); }

}  // namespace gmlp::viz
