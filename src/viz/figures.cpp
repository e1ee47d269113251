#include "viz/figures.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "train/eval_subset.h"

namespace gmlp::viz {

namespace {

const Rgb kWhite{255, 255, 255}, kInk{40, 40, 40}, kGrid{225, 225, 225}, kFrame{150, 150, 150};

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", std::abs(v) < 1e-12 ? 0.0 : v);
  return buf;
}

const char* x_label(XAxis x) { return x == XAxis::epoch ? "epoch" : "minutes (training and evaluation)"; }

// Beyond this many curves the legend sits right of the axes: inside it would cover the curves
// (a train/test pair fits in a corner; three long run names already cross the lines).
constexpr size_t kLegendInside = 2;

// The width of a legend beside the axes (0 when it goes inside).
int side_legend_width(const Panel& p) {
  if (p.curves.size() <= kLegendInside) return 0;
  int widest = 0;
  for (const Curve& cv : p.curves) widest = std::max(widest, Canvas::text_width(cv.name));
  return widest + 44;
}

// The data ranges of panels, and whether all their values on an axis are whole numbers.
struct Range {
  double xmin = 1e300, xmax = -1e300, ymin = 1e300, ymax = -1e300;
  bool x_whole = true, y_whole = true;

  void add(const Panel& p) {
    for (const Curve& cv : p.curves)
      for (size_t i = 0; i < cv.x.size() && i < cv.y.size(); ++i) {
        xmin = std::min(xmin, cv.x[i]), xmax = std::max(xmax, cv.x[i]);
        ymin = std::min(ymin, cv.y[i]), ymax = std::max(ymax, cv.y[i]);
        x_whole = x_whole && cv.x[i] == std::floor(cv.x[i]);
        y_whole = y_whole && cv.y[i] == std::floor(cv.y[i]);
      }
  }
  // The axes' extent: x as the data, y with 5 % of room above and below.
  Range axes() const {
    Range r = *this;
    if (r.xmin > r.xmax) r.xmin = 0, r.xmax = 1, r.ymin = 0, r.ymax = 1;
    if (r.xmax - r.xmin < 1e-12) r.xmin -= 0.5, r.xmax += 0.5;
    if (r.ymax - r.ymin < 1e-12) r.ymin -= 0.5, r.ymax += 0.5;
    const double pad = 0.05 * (r.ymax - r.ymin);
    r.ymin -= pad, r.ymax += pad;
    return r;
  }
};

void draw_panel(Canvas& c, int x0, int y0, int w, int h, const Panel& p, const Range& range) {
  const int side = side_legend_width(p);
  const int left = 70, right = 15 + side, top = 34, bottom = 48;  // room for labels
  const int px0 = x0 + left, px1 = x0 + w - right, py0 = y0 + top, py1 = y0 + h - bottom;
  const Range r = range.axes();
  const double xmin = r.xmin, xmax = r.xmax, ymin = r.ymin, ymax = r.ymax;
  auto X = [&](double v) { return px0 + (v - xmin) / (xmax - xmin) * (px1 - px0); };
  auto Y = [&](double v) { return py1 - (v - ymin) / (ymax - ymin) * (py1 - py0); };

  c.text(x0 + (w - Canvas::text_width(p.title)) / 2, y0 + 8, p.title, kInk);
  for (double t : nice_ticks(ymin, ymax, r.y_whole)) {
    c.line(px0, Y(t), px1, Y(t), kGrid);
    const std::string s = fmt(t);
    c.text(px0 - 8 - Canvas::text_width(s), int(Y(t)) - 7, s, kInk);
  }
  for (double t : nice_ticks(xmin, xmax, r.x_whole)) {
    c.line(X(t), py0, X(t), py1, kGrid);
    const std::string s = fmt(t);
    c.text(int(X(t)) - Canvas::text_width(s) / 2, py1 + 8, s, kInk);
  }
  c.text((px0 + px1 - Canvas::text_width(p.xlabel)) / 2, py1 + 28, p.xlabel, kInk);
  c.line(px0, py0, px0, py1, kFrame);
  c.line(px0, py1, px1, py1, kFrame);
  c.line(px1, py0, px1, py1, kFrame);
  c.line(px0, py0, px1, py0, kFrame);
  // A long legend goes beside the axes, from the top. A short one goes inside, in the corner
  // its box covers the least of the curves (top right first on a tie).
  int widest = 0;
  for (const Curve& cv : p.curves) widest = std::max(widest, Canvas::text_width(cv.name));
  const int legend_w = widest + 24, legend_h = 20 * int(p.curves.size());
  int legend_x = px1 + 14, legend_y = py0 + 8;
  if (!side) {
    const int left_x = px0 + 10, right_x = px1 - 10 - legend_w;
    const int top_y = py0 + 8, bottom_y = py1 - 8 - legend_h;
    const std::pair<int, int> corners[] = {{right_x, top_y}, {right_x, bottom_y}, {left_x, top_y}, {left_x, bottom_y}};
    long fewest = -1;
    for (const auto& [lx, ly] : corners) {
      long covered = 0;  // points along the curves, every pixel or so, inside the box (with a margin)
      for (const Curve& cv : p.curves)
        for (size_t i = 1; i < cv.x.size(); ++i) {
          const double ax = X(cv.x[i - 1]), ay = Y(cv.y[i - 1]), bx = X(cv.x[i]), by = Y(cv.y[i]);
          const int n = 1 + int(std::max(std::abs(bx - ax), std::abs(by - ay)));
          for (int k = 0; k <= n; ++k) {
            const double x = ax + (bx - ax) * k / n, y = ay + (by - ay) * k / n;
            covered += x >= lx - 6 && x <= lx + legend_w + 6 && y >= ly - 6 && y <= ly + legend_h + 6;
          }
        }
      if (fewest < 0 || covered < fewest) fewest = covered, legend_x = lx, legend_y = ly;
    }
  }
  for (const Curve& cv : p.curves) {
    for (size_t i = 1; i < cv.x.size(); ++i)
      c.line(X(cv.x[i - 1]), Y(cv.y[i - 1]), X(cv.x[i]), Y(cv.y[i]), cv.color, 2);
    for (size_t i = 0; i < cv.x.size(); ++i)
      c.fill_rect(int(X(cv.x[i])) - 2, int(Y(cv.y[i])) - 2, int(X(cv.x[i])) + 3, int(Y(cv.y[i])) + 3, cv.color);
  }
  for (const Curve& cv : p.curves) {  // over the curves, where they must cross it
    if (!side) c.fill_rect(legend_x - 4, legend_y - 2, legend_x + legend_w + 4, legend_y + 18, kWhite);
    c.fill_rect(legend_x, legend_y + 5, legend_x + 18, legend_y + 9, cv.color);
    c.text(legend_x + 24, legend_y, cv.name, kInk);
    legend_y += 20;
  }
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, bool integer, int max_ticks) {
  if (!(std::isfinite(lo) && std::isfinite(hi) && hi > lo)) return {};
  max_ticks = std::max(max_ticks, 2);
  const double span = hi - lo, eps = 1e-9 * span;
  // From a step too fine for max_ticks up: 1, 2, 5 × 10^k.
  for (double mag = std::pow(10.0, std::floor(std::log10(span / max_ticks)));; mag *= 10)
    for (double m : {1.0, 2.0, 5.0}) {
      const double step = m * mag;
      if (integer && step < 1) continue;
      const double first = std::ceil((lo - eps) / step), last = std::floor((hi + eps) / step);
      if (last - first + 1 > max_ticks) continue;
      std::vector<double> t;
      for (int64_t i = 0; i <= int64_t(last - first); ++i) {
        const double k = first + double(i);
        t.push_back(k * step == 0 ? 0.0 : k * step);
      }
      return t;
    }
}

Canvas render_spatial_weights(const float* W, int grid, const std::string& title, ColorScale scale) {
  GMLP_CHECK(grid > 0);
  const int N = grid * grid;
  float lo = 0, hi = 0, largest = 0;  // W's range and largest |w|
  for (int64_t i = 0; i < int64_t(N) * N; ++i) lo = std::min(lo, W[i]), hi = std::max(hi, W[i]);
  largest = std::max(-lo, hi);
  const int cell = std::max(2, 64 / grid);  // pixels per token within a tile
  const int tile = grid * cell, gap = 3, margin = 12, header = 36, footer = 30;
  const int side = grid * tile + (grid - 1) * gap;
  // The colour bar: as tall as the tiles, right of them, its ends and 0 labelled.
  char top_label[32], bottom_label[32];
  if (scale == ColorScale::tile)
    std::snprintf(top_label, sizeof top_label, "+1"), std::snprintf(bottom_label, sizeof bottom_label, "-1");
  else
    std::snprintf(top_label, sizeof top_label, "%+.3g", double(largest)),
        std::snprintf(bottom_label, sizeof bottom_label, "%+.3g", -double(largest));
  const int bar_x = margin + side + 16, bar_w = 16;
  const int labels_w =
      std::max({Canvas::text_width(top_label), Canvas::text_width(bottom_label), Canvas::text_width("0")});
  char caption[160];
  std::snprintf(
      caption, sizeof caption, "%s; W from %.3g to %.3g",
      scale == ColorScale::tile ? "colour: w / largest |w| of its tile" : "colour: w, one scale for every tile",
      double(lo), double(hi));
  const int width = std::max({bar_x + bar_w + 8 + labels_w + margin, margin + Canvas::text_width(caption) + margin,
                              margin + Canvas::text_width(title) + margin});
  Canvas c(width, header + side + footer, kWhite);
  c.text(margin, 10, title, kInk);
  c.fill_rect(margin, header, margin + side, header + side, kFrame);  // the gaps between tiles
  for (int n = 0; n < N; ++n) {
    const float* row = W + int64_t(n) * N;
    float mx = largest;
    if (scale == ColorScale::tile) {
      mx = 0;
      for (int m = 0; m < N; ++m) mx = std::max(mx, std::abs(row[m]));
    }
    const int tx = margin + (n % grid) * (tile + gap), ty = header + (n / grid) * (tile + gap);
    for (int m = 0; m < N; ++m) {
      const int x = tx + (m % grid) * cell, y = ty + (m / grid) * cell;
      c.fill_rect(x, y, x + cell, y + cell, diverging(mx > 0 ? row[m] / mx : 0.0));
    }
  }
  // Top +1 (red) through 0 (white) to -1 (blue) at the bottom, framed, with ticks at the labels.
  for (int y = 0; y < side; ++y)
    c.fill_rect(bar_x, header + y, bar_x + bar_w, header + y + 1, diverging(1.0 - 2.0 * (y + 0.5) / side));
  c.line(bar_x - 1, header - 1, bar_x + bar_w, header - 1, kFrame);
  c.line(bar_x - 1, header + side, bar_x + bar_w, header + side, kFrame);
  c.line(bar_x - 1, header - 1, bar_x - 1, header + side, kFrame);
  c.line(bar_x + bar_w, header - 1, bar_x + bar_w, header + side, kFrame);
  const std::pair<int, const char*> labels[] = {
      {header, top_label}, {header + side / 2, "0"}, {header + side - 1, bottom_label}};
  for (const auto& [y, label] : labels) {
    c.line(bar_x + bar_w, y, bar_x + bar_w + 4, y, kInk);
    c.text(bar_x + bar_w + 8, std::clamp(y - 7, header - 7, header + side - 7), label, kInk);
  }
  c.text(margin, header + side + 10, caption, kInk);
  return c;
}

Canvas render_panels(const std::vector<Panel>& panels, const std::string& title, int columns, bool shared_axes) {
  int side = 0;
  for (const Panel& p : panels) side = std::max(side, side_legend_width(p));
  const int pw = 520 + side, ph = 400, header = 30, n = std::max(1, int(panels.size()));
  const int cols = columns > 0 ? std::min(columns, n) : n, rows = (n + cols - 1) / cols;
  Canvas c(pw * cols, ph * rows + header, kWhite);
  c.text((c.width() - Canvas::text_width(title)) / 2, 8, title, kInk);
  Range all;
  for (const Panel& p : panels) all.add(p);
  for (size_t i = 0; i < panels.size(); ++i) {
    Range own;
    own.add(panels[i]);
    draw_panel(c, int(i) % cols * pw, header + int(i) / cols * ph, pw, ph, panels[i], shared_axes ? all : own);
  }
  return c;
}

Rgb palette(int i) {  // Tableau 10
  static const Rgb colors[] = {{31, 119, 180}, {255, 127, 14},  {44, 160, 44},   {214, 39, 40},  {148, 103, 189},
                               {140, 86, 75},  {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207}};
  return colors[((i % 10) + 10) % 10];
}

std::vector<double> x_values(const std::vector<nlohmann::json>& rows, XAxis x) {
  std::vector<double> out;
  double seconds = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json& r = rows[i];
    if (x == XAxis::epoch) {
      out.push_back(r.value("epoch", 0.0));
      continue;
    }
    if (!r.contains("seconds") || !r["seconds"].is_number())
      fail("row ", i + 1, " (epoch ", r.value("epoch", 0), ") has no number 'seconds' to draw against time");
    seconds += r["seconds"].get<double>();
    out.push_back(seconds / 60);
  }
  return out;
}

Canvas render_training_curves(const std::vector<nlohmann::json>& rows, const std::string& title, XAxis x) {
  // Image training logs train and test (and the weights' moving average on test, with --ema);
  // pretraining train and dev; finetuning all three splits.
  // A split evaluated on a subset (--eval-limit) says how much of it: "test (2,000 of 10,000)".
  struct Series {
    const char *name, *split, *acc_key, *loss_key;
    Rgb color;
  };
  const Series series[] = {{"train", "train", "train_acc", "train_loss", {33, 102, 172}},
                           {"dev", "dev", "dev_acc", "dev_loss", {27, 158, 119}},
                           {"test", "test", "test_acc", "test_loss", {214, 96, 77}},
                           {"test, EMA", "test", "test_acc_ema", "test_loss_ema", {118, 42, 131}}};
  auto name = [&](const Series& s) {
    if (rows.empty()) return std::string(s.name);
    const nlohmann::json& last = rows.back();
    const std::string count = std::string(s.split) + "_count", total = std::string(s.split) + "_total";
    if (!last.contains(count) || !last.contains(total) || !last[count].is_number() || !last[total].is_number())
      return std::string(s.name);
    const std::string subset = subset_label(last[count].get<int64_t>(), last[total].get<int64_t>());
    return subset.empty() ? std::string(s.name) : std::string(s.name) + " (" + subset + ")";
  };
  const std::vector<double> xs = x_values(rows, x);
  Panel acc{"accuracy (%)", x_label(x), {}}, loss{"loss", x_label(x), {}};
  for (const Series& s : series) {
    Curve a{name(s), {}, {}, s.color}, l{name(s), {}, {}, s.color};
    for (size_t i = 0; i < rows.size(); ++i) {
      const nlohmann::json& r = rows[i];
      const double e = xs[i];
      if (r.contains(s.acc_key) && r[s.acc_key].is_number())
        a.x.push_back(e), a.y.push_back(100 * r[s.acc_key].get<double>());
      if (r.contains(s.loss_key) && r[s.loss_key].is_number())
        l.x.push_back(e), l.y.push_back(r[s.loss_key].get<double>());
    }
    if (!a.x.empty()) acc.curves.push_back(std::move(a));
    if (!l.x.empty()) loss.curves.push_back(std::move(l));
  }
  return render_panels({acc, loss}, title);
}

Canvas render_runs(const std::vector<std::pair<std::string, std::vector<nlohmann::json>>>& runs,
                   const std::string& title, XAxis x) {
  // The first of these that every run logs: a test accuracy (image training, finetuning), or
  // the dev loss of pretraining (the log of the dev perplexity, which spans too much to read).
  const std::pair<const char*, const char*> metrics[] = {
      {"test_acc", "test accuracy (%)"}, {"dev_loss", "dev loss (ln perplexity)"}, {"dev_acc", "dev accuracy (%)"}};
  for (const auto& [key, label] : metrics) {
    Panel p{label, x_label(x), {}};
    const double scale = std::string(key).ends_with("_acc") ? 100 : 1;
    for (size_t i = 0; i < runs.size(); ++i) {
      Curve cv{runs[i].first, {}, {}, palette(int(i))};
      const std::vector<double> xs = x_values(runs[i].second, x);
      for (size_t j = 0; j < runs[i].second.size(); ++j)
        if (const nlohmann::json& r = runs[i].second[j]; r.contains(key) && r[key].is_number()) {
          cv.x.push_back(xs[j]);
          cv.y.push_back(scale * r[key].get<double>());
        }
      if (cv.x.empty()) break;
      p.curves.push_back(std::move(cv));
    }
    if (p.curves.size() == runs.size()) return render_panels({p}, title);
  }
  fail("the runs share no metric to draw: expected test_acc, dev_loss or dev_acc in every run's metrics.jsonl");
}

}  // namespace gmlp::viz
