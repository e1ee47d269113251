// A small RGB raster for the pictures gmlp writes (learned spatial weights, training curves):
// filled rectangles, lines, and text in stb_easy_font's built-in bitmap font, saved as PNG.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gmlp::viz {

struct Rgb {
  uint8_t r, g, b;
};

// A diverging blue–white–red map of v ∈ [-1, 1] (values outside are clamped).
Rgb diverging(double v);

class Canvas {
 public:
  Canvas(int width, int height, Rgb background);
  int width() const { return w_; }
  int height() const { return h_; }
  Rgb at(int x, int y) const;

  void fill_rect(int x0, int y0, int x1, int y1, Rgb c);  // [x0, x1) × [y0, y1), clipped
  void line(double x0, double y0, double x1, double y1, Rgb c, int thickness = 1);
  // Text with its top-left corner at (x, y); each font pixel drawn as scale × scale.
  void text(int x, int y, const std::string& s, Rgb c, int scale = 2);
  static int text_width(const std::string& s, int scale = 2);
  static int text_height(int scale = 2) { return 7 * scale; }

  void save_png(const std::string& path) const;  // atomic

 private:
  int w_, h_;
  std::vector<uint8_t> px_;  // (h, w, 3)
};

}  // namespace gmlp::viz
