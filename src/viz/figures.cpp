#include "viz/figures.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace gmlp::viz {

namespace {

const Rgb kWhite{255, 255, 255}, kInk{40, 40, 40}, kGrid{225, 225, 225}, kFrame{150, 150, 150};

// About five round tick values covering [lo, hi].
std::vector<double> ticks(double lo, double hi) {
  const double span = hi - lo, raw = span / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + 1e-9 * span; v += step) t.push_back(v);
  return t;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", std::abs(v) < 1e-12 ? 0.0 : v);
  return buf;
}

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

void draw_panel(Canvas& c, int x0, int y0, int w, int h, const Panel& p) {
  const int side = side_legend_width(p);
  const int left = 70, right = 15 + side, top = 34, bottom = 48;  // room for labels
  const int px0 = x0 + left, px1 = x0 + w - right, py0 = y0 + top, py1 = y0 + h - bottom;
  double xmin = 1e300, xmax = -1e300, ymin = 1e300, ymax = -1e300;
  for (const Curve& cv : p.curves)
    for (size_t i = 0; i < cv.x.size(); ++i) {
      xmin = std::min(xmin, cv.x[i]), xmax = std::max(xmax, cv.x[i]);
      ymin = std::min(ymin, cv.y[i]), ymax = std::max(ymax, cv.y[i]);
    }
  if (xmin > xmax) xmin = 0, xmax = 1, ymin = 0, ymax = 1;
  if (xmax - xmin < 1e-12) xmin -= 0.5, xmax += 0.5;
  if (ymax - ymin < 1e-12) ymin -= 0.5, ymax += 0.5;
  const double pad = 0.05 * (ymax - ymin);
  ymin -= pad, ymax += pad;
  auto X = [&](double v) { return px0 + (v - xmin) / (xmax - xmin) * (px1 - px0); };
  auto Y = [&](double v) { return py1 - (v - ymin) / (ymax - ymin) * (py1 - py0); };

  c.text(x0 + (w - Canvas::text_width(p.title)) / 2, y0 + 8, p.title, kInk);
  for (double t : ticks(ymin, ymax)) {
    c.line(px0, Y(t), px1, Y(t), kGrid);
    const std::string s = fmt(t);
    c.text(px0 - 8 - Canvas::text_width(s), int(Y(t)) - 7, s, kInk);
  }
  for (double t : ticks(xmin, xmax)) {
    c.line(X(t), py0, X(t), py1, kGrid);
    const std::string s = fmt(t);
    c.text(int(X(t)) - Canvas::text_width(s) / 2, py1 + 8, s, kInk);
  }
  c.text((px0 + px1 - Canvas::text_width(p.xlabel)) / 2, py1 + 28, p.xlabel, kInk);
  c.line(px0, py0, px0, py1, kFrame);
  c.line(px0, py1, px1, py1, kFrame);
  c.line(px1, py0, px1, py1, kFrame);
  c.line(px0, py0, px1, py0, kFrame);
  // A short legend goes in the top-right corner, or the bottom-right when the curves end up
  // high; a long one beside the axes, from the top.
  bool ends_high = false;
  for (const Curve& cv : p.curves)
    if (!cv.y.empty() && Y(cv.y.back()) < (py0 + py1) / 2.0) ends_high = true;
  int legend_y = side || !ends_high ? py0 + 8 : py1 - 8 - 20 * int(p.curves.size());
  for (const Curve& cv : p.curves) {
    for (size_t i = 1; i < cv.x.size(); ++i)
      c.line(X(cv.x[i - 1]), Y(cv.y[i - 1]), X(cv.x[i]), Y(cv.y[i]), cv.color, 2);
    for (size_t i = 0; i < cv.x.size(); ++i)
      c.fill_rect(int(X(cv.x[i])) - 2, int(Y(cv.y[i])) - 2, int(X(cv.x[i])) + 3, int(Y(cv.y[i])) + 3, cv.color);
    const int lx = side ? px1 + 14 : px1 - 10 - Canvas::text_width(cv.name) - 26;
    c.fill_rect(lx, legend_y + 5, lx + 18, legend_y + 9, cv.color);
    c.text(lx + 24, legend_y, cv.name, kInk);
    legend_y += 20;
  }
}

}  // namespace

Canvas render_spatial_weights(const float* W, int grid, const std::string& title) {
  GMLP_CHECK(grid > 0);
  const int N = grid * grid;
  const int cell = std::max(2, 64 / grid);  // pixels per token within a tile
  const int tile = grid * cell, gap = 3, margin = 12, header = 36;
  const int side = grid * tile + (grid - 1) * gap;
  Canvas c(side + 2 * margin, side + margin + header, kWhite);
  c.text(margin, 10, title, kInk);
  c.fill_rect(margin, header, margin + side, header + side, kFrame);  // the gaps between tiles
  for (int n = 0; n < N; ++n) {
    const float* row = W + int64_t(n) * N;
    float mx = 0;
    for (int m = 0; m < N; ++m) mx = std::max(mx, std::abs(row[m]));
    const int tx = margin + (n % grid) * (tile + gap), ty = header + (n / grid) * (tile + gap);
    for (int m = 0; m < N; ++m) {
      const int x = tx + (m % grid) * cell, y = ty + (m / grid) * cell;
      c.fill_rect(x, y, x + cell, y + cell, diverging(mx > 0 ? row[m] / mx : 0.0));
    }
  }
  return c;
}

Canvas render_panels(const std::vector<Panel>& panels, const std::string& title, int columns) {
  int side = 0;
  for (const Panel& p : panels) side = std::max(side, side_legend_width(p));
  const int pw = 520 + side, ph = 400, header = 30, n = std::max(1, int(panels.size()));
  const int cols = columns > 0 ? std::min(columns, n) : n, rows = (n + cols - 1) / cols;
  Canvas c(pw * cols, ph * rows + header, kWhite);
  c.text((c.width() - Canvas::text_width(title)) / 2, 8, title, kInk);
  for (size_t i = 0; i < panels.size(); ++i)
    draw_panel(c, int(i) % cols * pw, header + int(i) / cols * ph, pw, ph, panels[i]);
  return c;
}

Rgb palette(int i) {  // Tableau 10
  static const Rgb colors[] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44},  {214, 39, 40},
                               {148, 103, 189}, {140, 86, 75}, {227, 119, 194}, {127, 127, 127},
                               {188, 189, 34},  {23, 190, 207}};
  return colors[((i % 10) + 10) % 10];
}

Canvas render_training_curves(const std::vector<nlohmann::json>& rows, const std::string& title) {
  // Image training logs train and test (and the weights' moving average on test, with --ema);
  // pretraining train and dev; finetuning all three splits.
  struct Series {
    const char *name, *acc_key, *loss_key;
    Rgb color;
  };
  const Series series[] = {{"train", "train_acc", "train_loss", {33, 102, 172}},
                           {"dev", "dev_acc", "dev_loss", {27, 158, 119}},
                           {"test", "test_acc", "test_loss", {214, 96, 77}},
                           {"test, EMA", "test_acc_ema", "test_loss_ema", {118, 42, 131}}};
  Panel acc{"accuracy (%)", "epoch", {}}, loss{"loss", "epoch", {}};
  for (const Series& s : series) {
    Curve a{s.name, {}, {}, s.color}, l{s.name, {}, {}, s.color};
    for (const auto& r : rows) {
      const double e = r.value("epoch", 0.0);
      if (r.contains(s.acc_key) && r[s.acc_key].is_number()) a.x.push_back(e), a.y.push_back(100 * r[s.acc_key].get<double>());
      if (r.contains(s.loss_key) && r[s.loss_key].is_number()) l.x.push_back(e), l.y.push_back(r[s.loss_key].get<double>());
    }
    if (!a.x.empty()) acc.curves.push_back(std::move(a));
    if (!l.x.empty()) loss.curves.push_back(std::move(l));
  }
  return render_panels({acc, loss}, title);
}

Canvas render_runs(const std::vector<std::pair<std::string, std::vector<nlohmann::json>>>& runs,
                   const std::string& title) {
  // The first of these that every run logs: a test accuracy (image training, finetuning), or
  // the dev loss of pretraining (the log of the dev perplexity, which spans too much to read).
  const std::pair<const char*, const char*> metrics[] = {
      {"test_acc", "test accuracy (%)"}, {"dev_loss", "dev loss (ln perplexity)"}, {"dev_acc", "dev accuracy (%)"}};
  for (const auto& [key, label] : metrics) {
    Panel p{label, "epoch", {}};
    const double scale = std::string(key).ends_with("_acc") ? 100 : 1;
    for (size_t i = 0; i < runs.size(); ++i) {
      Curve cv{runs[i].first, {}, {}, palette(int(i))};
      for (const auto& r : runs[i].second)
        if (r.contains(key) && r[key].is_number()) {
          cv.x.push_back(r.value("epoch", 0.0));
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
