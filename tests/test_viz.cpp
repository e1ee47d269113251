// The pictures: pixels where the figure says they are. A W whose rows are one-hot puts the one
// saturated cell of tile n at token n; curves land inside their panel in their colour.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/rng.h"
#include "io/image.h"
#include "viz/figures.h"

namespace gmlp::viz {
namespace {

bool same(Rgb a, Rgb b) { return a.r == b.r && a.g == b.g && a.b == b.b; }

TEST(Viz, DivergingMapEndsAndMiddle) {
  EXPECT_TRUE(same(diverging(0), Rgb{247, 247, 247}));
  EXPECT_TRUE(same(diverging(1), Rgb{178, 24, 43}));
  EXPECT_TRUE(same(diverging(-5), Rgb{33, 102, 172}));  // clamped
}

TEST(Viz, SpatialWeightsPutEachRowInItsTile) {
  const int grid = 3, N = 9;
  std::vector<float> W(N * N, 0.f);
  for (int n = 0; n < N; ++n) W[n * N + (N - 1 - n)] = n % 2 ? -2.f : 0.5f;  // row n → token 8-n
  const Canvas c = render_spatial_weights(W.data(), grid, "t");
  // Layout as drawn: cell = 64/3 = 21 px, tile = 63, gap 3, margin 12, header 36.
  const int cell = 21, tile = 63, gap = 3, margin = 12, header = 36;
  for (int n = 0; n < N; ++n) {
    const int m = N - 1 - n;
    const int tx = margin + (n % grid) * (tile + gap), ty = header + (n / grid) * (tile + gap);
    const Rgb hot = c.at(tx + (m % grid) * cell + cell / 2, ty + (m / grid) * cell + cell / 2);
    EXPECT_TRUE(same(hot, diverging(n % 2 ? -1.0 : 1.0))) << "tile " << n;
    const int other = (m + 1) % N;  // any other token of the row is 0 → white
    EXPECT_TRUE(same(c.at(tx + (other % grid) * cell + 1, ty + (other / grid) * cell + 1), diverging(0)));
  }
}

TEST(Viz, TrainingCurvesAreDrawnAndSaved) {
  std::vector<nlohmann::json> rows;
  for (int e = 1; e <= 5; ++e)
    rows.push_back({{"epoch", e},
                    {"train_acc", 0.5 + 0.08 * e},
                    {"test_acc", 0.55 + 0.07 * e},
                    {"train_loss", 1.5 / e},
                    {"test_loss", 1.2 / e}});
  const Canvas c = render_training_curves(rows, "run");
  EXPECT_EQ(c.width(), 1040);
  int train_px = 0, test_px = 0;
  for (int y = 0; y < c.height(); ++y)
    for (int x = 0; x < c.width(); ++x) {
      train_px += same(c.at(x, y), Rgb{33, 102, 172});
      test_px += same(c.at(x, y), Rgb{214, 96, 77});
    }
  EXPECT_GT(train_px, 500);  // two thick polylines per colour and their markers
  EXPECT_GT(test_px, 500);
  const std::string path = ::testing::TempDir() + "gmlp_curves.png";
  c.save_png(path);
  const auto back = img::load_image(path, 3, c.height(), c.width());
  std::filesystem::remove(path);
  EXPECT_NEAR(back[0], 1.0f, 1e-6f);  // the white background, red channel, top-left
}

int count(const Canvas& c, Rgb color) {
  int n = 0;
  for (int y = 0; y < c.height(); ++y)
    for (int x = 0; x < c.width(); ++x) n += same(c.at(x, y), color);
  return n;
}

TEST(Viz, TrainingCurvesDrawEachSplitTheRowsHold) {
  const Rgb train{33, 102, 172}, dev{27, 158, 119}, test{214, 96, 77};
  std::vector<nlohmann::json> pretrain, finetune;  // pretraining logs train and dev; finetuning all three
  for (int e = 1; e <= 4; ++e) {
    pretrain.push_back({{"epoch", e},
                        {"train_acc", 0.1 * e},
                        {"dev_acc", 0.09 * e},
                        {"train_loss", 6.0 / e},
                        {"dev_loss", 5.5 / e},
                        {"dev_ppl", std::exp(5.5 / e)}});
    finetune.push_back(pretrain.back());
    finetune.back()["test_acc"] = 0.08 * e;
  }
  const Canvas a = render_training_curves(pretrain, "pretrain"), b = render_training_curves(finetune, "finetune");
  EXPECT_GT(count(a, train), 500);
  EXPECT_GT(count(a, dev), 500);
  EXPECT_EQ(count(a, test), 0);  // no test split: neither a curve nor a legend entry
  EXPECT_GT(count(b, test), 300);
}

TEST(Viz, TrainingCurvesDrawTheMovingAverageWhenLogged) {
  const Rgb ema{118, 42, 131};
  std::vector<nlohmann::json> plain, averaged;  // image training without and with --ema
  for (int e = 1; e <= 4; ++e) {
    plain.push_back({{"epoch", e},
                     {"train_acc", 0.2 * e},
                     {"test_acc", 0.2 * e + 0.01},
                     {"train_loss", 2.0 / e},
                     {"test_loss", 1.9 / e}});
    averaged.push_back(plain.back());
    averaged.back()["test_acc_ema"] = 0.2 * e - 0.05;
    averaged.back()["test_loss_ema"] = 2.1 / e;
  }
  EXPECT_EQ(count(render_training_curves(plain, "plain"), ema), 0);
  EXPECT_GT(count(render_training_curves(averaged, "ema"), ema), 500);
}

TEST(Viz, RunsShareTestAccuracyOrElseDevLoss) {
  std::vector<std::pair<std::string, std::vector<nlohmann::json>>> runs(2);
  for (int i = 0; i < 2; ++i) {
    runs[i].first = "run-" + std::to_string(i);
    for (int e = 1; e <= 3; ++e) runs[i].second.push_back({{"epoch", e}, {"dev_loss", 5.0 - e - i}});
  }
  const Canvas c = render_runs(runs, "pretraining");
  EXPECT_GT(count(c, palette(0)), 100);
  EXPECT_GT(count(c, palette(1)), 100);
  runs[1].second = {{{"epoch", 1}, {"test_acc", 0.5}}};  // nothing in common with run-0
  EXPECT_THROW(render_runs(runs, "mixed"), Error);
}

TEST(Viz, TimeAxisIsTheRunningSumOfEachEpochsSecondsInMinutes) {
  const std::vector<nlohmann::json> rows = {
      {{"epoch", 1}, {"seconds", 90.0}}, {{"epoch", 2}, {"seconds", 30.0}}, {{"epoch", 3}, {"seconds", 60.0}}};
  EXPECT_EQ(x_values(rows, XAxis::epoch), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(x_values(rows, XAxis::time), (std::vector<double>{1.5, 2, 3}));
  const std::vector<nlohmann::json> untimed = {{{"epoch", 1}, {"seconds", 60.0}}, {{"epoch", 2}}};
  EXPECT_EQ(x_values(untimed, XAxis::epoch), (std::vector<double>{1, 2}));
  EXPECT_THROW(x_values(untimed, XAxis::time), Error);
}

TEST(Viz, RunsAgainstTimeEndWhereTheirTimeEnds) {
  // Three runs of three epochs (so the legend sits beside the axes): run-0 takes a minute an
  // epoch, the others two. Against epochs every curve spans the axes; against time run-0's ends
  // at 3 of 6 minutes, so nothing of its colour lies in the right third of the axes.
  std::vector<std::pair<std::string, std::vector<nlohmann::json>>> runs(3);
  for (int i = 0; i < 3; ++i) {
    runs[i].first = "run-" + std::to_string(i);
    for (int e = 1; e <= 3; ++e)
      runs[i].second.push_back({{"epoch", e}, {"test_acc", 0.5 + 0.1 * i + 0.02 * e}, {"seconds", i ? 120.0 : 60.0}});
  }
  auto right_third = [](const Canvas& c, Rgb color) {
    const int px0 = 70, px1 = c.width() - 15 - (Canvas::text_width("run-0") + 44);
    int n = 0;
    for (int y = 0; y < c.height(); ++y)
      for (int x = px0 + 2 * (px1 - px0) / 3; x < px1; ++x) n += same(c.at(x, y), color);
    return n;
  };
  EXPECT_GT(right_third(render_runs(runs, "epochs", XAxis::epoch), palette(0)), 100);
  const Canvas timed = render_runs(runs, "time", XAxis::time);
  EXPECT_EQ(right_third(timed, palette(0)), 0);
  EXPECT_GT(right_third(timed, palette(1)), 100);
}

TEST(Viz, ManyCurvesGetTheirLegendBesideTheAxes) {
  // Eight rising curves (a comparison): the legend must not cover them, so it sits right of the
  // axes, where each curve's swatch is the only thing in its colour. (Three or more do.)
  Panel p{"test accuracy", "epoch", {}};
  for (int i = 0; i < 8; ++i)
    p.curves.push_back({"model-" + std::to_string(i), {1, 2, 3}, {50.0 + i, 70.0 + i, 90.0 + i}, palette(i)});
  const Canvas c = render_panels({p}, "compare");
  ASSERT_GT(c.width(), 520);
  const int axes_right = c.width() - 15 - (Canvas::text_width("model-0") + 44);
  for (int i = 0; i < 8; ++i) {
    int beside = 0;
    for (int y = 0; y < c.height(); ++y)
      for (int x = axes_right + 1; x < c.width(); ++x) beside += same(c.at(x, y), palette(i));
    EXPECT_GT(beside, 40) << "curve " << i;  // the 18×4 swatch
  }
}

// True when v is 1, 2 or 5 times a power of ten.
bool nice_step(double v) {
  const double mag = std::pow(10.0, std::floor(std::log10(v) + 1e-9));
  const double m = v / mag;
  return std::abs(m - 1) < 1e-6 || std::abs(m - 2) < 1e-6 || std::abs(m - 5) < 1e-6;
}

TEST(Viz, TicksAreRoundStepsAndWholeOnAWholeAxis) {
  EXPECT_EQ(nice_ticks(1, 3, true), (std::vector<double>{1, 2, 3}));  // epochs 1..3: not 1.5, 2.5
  EXPECT_EQ(nice_ticks(1, 2, true), (std::vector<double>{1, 2}));     // not 1.2, 1.4, ...
  EXPECT_EQ(nice_ticks(0.5, 1.5, true), (std::vector<double>{1}));    // one epoch, padded
  EXPECT_EQ(nice_ticks(1, 3, false), (std::vector<double>{1, 1.5, 2, 2.5, 3}));
  EXPECT_TRUE(nice_ticks(3, 3, true).empty());  // an empty range
  // Many ranges, whole and not: at most ten ticks, equally spaced by a nice step, inside the
  // range, and whole numbers on a whole axis.
  Rng rng(5);
  for (int trial = 0; trial < 2000; ++trial) {
    const bool whole = trial % 2 == 0;
    const double lo = std::round(rng.uniform(-1000, 1000) * (whole ? 1 : 0.013)) / (whole ? 1 : 7.0);
    const double hi = lo + (whole ? 1 + double(rng.below(500)) : rng.uniform(1e-3, 300));
    const std::vector<double> t = nice_ticks(lo, hi, whole);
    SCOPED_TRACE(::testing::Message() << "[" << lo << ", " << hi << "] whole " << whole);
    ASSERT_GE(t.size(), 2u);
    ASSERT_LE(t.size(), 10u);
    const double step = t[1] - t[0];
    EXPECT_TRUE(nice_step(step)) << step;
    for (size_t i = 0; i < t.size(); ++i) {
      EXPECT_GE(t[i], lo - 1e-9 * (hi - lo));
      EXPECT_LE(t[i], hi + 1e-9 * (hi - lo));
      if (i > 0) {
        EXPECT_NEAR(t[i] - t[i - 1], step, 1e-9 * step);
      }
      if (whole) {
        EXPECT_EQ(t[i], std::floor(t[i])) << t[i];
      }
    }
  }
}

// The columns of the first panel that are vertical grid lines: grid-coloured over most of it.
int vertical_grid_lines(const Canvas& c, int x0, int x1) {
  const Rgb grid{225, 225, 225};
  int lines = 0;
  for (int x = x0; x < x1; ++x) {
    int n = 0;
    for (int y = 0; y < c.height(); ++y) n += same(c.at(x, y), grid);
    lines += n > c.height() / 2;
  }
  return lines;
}

TEST(Viz, EpochAxisTicksAtWholeEpochsOnly) {
  // Three epochs: the axis spans 1..3 and ticks at 1, 2, 3; 1 and 3 lie on the frame, so one grid
  // line inside the accuracy panel (ticks at 1.5 and 2.5 would make three).
  std::vector<nlohmann::json> rows;
  for (int e = 1; e <= 3; ++e)
    rows.push_back({{"epoch", e},
                    {"train_acc", 0.2 * e},
                    {"test_acc", 0.2 * e + 0.05},
                    {"train_loss", 2.0 / e},
                    {"test_loss", 1.9 / e}});
  const Canvas c = render_training_curves(rows, "run");
  EXPECT_EQ(vertical_grid_lines(c, 72, 520 - 17), 1);
}

TEST(Viz, SpatialWeightsHaveALabelledColourBar) {
  const int grid = 3, N = 9;
  std::vector<float> W(N * N);
  for (int i = 0; i < N * N; ++i) W[i] = float(i % 7) - 3.f;  // -3 .. 3
  for (ColorScale scale : {ColorScale::tile, ColorScale::shared}) {
    const Canvas c = render_spatial_weights(W.data(), grid, "t", scale);
    // Right of the tiles (margin 12 + 3 tiles of 63 + 2 gaps of 3 = 207), the bar runs from the
    // map's +1 at the top to -1 at the bottom through white, across the tiles' height (36 .. 231).
    const int bar_x = 207 + 16 + 8, top = 36, bottom = 36 + 195 - 1, middle = 36 + 195 / 2;
    ASSERT_GT(c.width(), bar_x + 40);
    auto near = [](Rgb a, Rgb b) { return std::abs(a.r - b.r) + std::abs(a.g - b.g) + std::abs(a.b - b.b) <= 12; };
    EXPECT_TRUE(near(c.at(bar_x, top), diverging(1)));
    EXPECT_TRUE(near(c.at(bar_x, bottom), diverging(-1)));
    EXPECT_TRUE(near(c.at(bar_x, middle), diverging(0)));
    // Labels right of the bar at its top, middle and bottom: ink in each of those rows.
    const Rgb ink{40, 40, 40};
    for (int y : {top, middle, bottom - 6}) {
      int inked = 0;
      for (int yy = y - 7; yy <= y + 7; ++yy)
        for (int x = bar_x + 16; x < c.width(); ++x) inked += same(c.at(x, yy), ink);
      EXPECT_GT(inked, 5) << "no label near row " << y;
    }
  }
  // The shared scale colours by w / max|W|: a 1.5 among ±3 is half-saturated, not full.
  std::vector<float> V(N * N, 0.f);
  V[0] = 1.5f, V[1] = -3.f;  // tile 0: tokens 0 and 1
  const Canvas v = render_spatial_weights(V.data(), grid, "t", ColorScale::shared);
  EXPECT_TRUE(same(v.at(12 + 10, 36 + 10), diverging(0.5)));
  EXPECT_TRUE(same(v.at(12 + 21 + 10, 36 + 10), diverging(-1)));
  const Canvas t = render_spatial_weights(V.data(), grid, "t", ColorScale::tile);
  EXPECT_TRUE(same(t.at(12 + 10, 36 + 10), diverging(0.5)));  // tile 0's own max is 3 too
}

// The topmost row holding a colour within columns [x0, x1).
int top_row(const Canvas& c, Rgb color, int x0, int x1) {
  for (int y = 0; y < c.height(); ++y)
    for (int x = x0; x < x1; ++x)
      if (same(c.at(x, y), color)) return y;
  return -1;
}

TEST(Viz, SharedAxesPutEqualValuesAtEqualHeights) {
  // Two models' panels: one rises from 10 to 90 %, the other from 40 to 60 %. On their own axes
  // both lines span their panel; on shared axes the second stays in the middle band.
  const Rgb a = palette(0), b = palette(1);
  const std::vector<Panel> panels = {{"a", "epoch", {{"a", {1, 2, 3}, {10, 50, 90}, a}}},
                                     {"b", "epoch", {{"b", {1, 2, 3}, {40, 50, 60}, b}}}};
  const Canvas own = render_panels(panels, "own", 2), shared = render_panels(panels, "shared", 2, true);
  // Each curve's last point, its marker on the right edge of the axes (x = 505 in a 520-wide
  // panel), where no legend goes.
  auto last_point = [](const Canvas& c, Rgb color, int panel) {
    return top_row(c, color, panel * 520 + 503, panel * 520 + 508);
  };
  EXPECT_NEAR(last_point(own, a, 0), last_point(own, b, 1), 3);
  EXPECT_GT(last_point(shared, b, 1) - last_point(shared, a, 0), 80);  // 60 against 90 of 6..94: 108 px
}

TEST(Viz, ShortLegendAvoidsTheCurves) {
  // A curve that ends high on the right and one that ends low on the right: the right-hand
  // corners hold curve, the top-left corner is empty, so the legend goes there.
  Panel p{"acc",
          "epoch",
          {{"up", {1, 2, 3, 4}, {10, 20, 60, 95}, palette(0)}, {"down", {1, 2, 3, 4}, {30, 25, 12, 5}, palette(1)}}};
  const Canvas c = render_panels({p}, "legend");
  // Swatches are 18×4 blocks of the curve colour; the top-left of the axes starts at x = 70.
  int left_swatch = 0;
  for (int y = 34; y < 34 + 60; ++y)
    for (int x = 70 + 10; x < 70 + 10 + 18; ++x) left_swatch += same(c.at(x, y), palette(0));
  EXPECT_GE(left_swatch, 60);
}

}  // namespace
}  // namespace gmlp::viz
