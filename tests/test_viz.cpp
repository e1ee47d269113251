// The pictures: pixels where the figure says they are. A W whose rows are one-hot puts the one
// saturated cell of tile n at token n; curves land inside their panel in their colour.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/error.h"
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
    rows.push_back({{"epoch", e}, {"train_acc", 0.5 + 0.08 * e}, {"test_acc", 0.55 + 0.07 * e},
                    {"train_loss", 1.5 / e}, {"test_loss", 1.2 / e}});
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
    pretrain.push_back({{"epoch", e}, {"train_acc", 0.1 * e}, {"dev_acc", 0.09 * e},
                        {"train_loss", 6.0 / e}, {"dev_loss", 5.5 / e}, {"dev_ppl", std::exp(5.5 / e)}});
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
    plain.push_back({{"epoch", e}, {"train_acc", 0.2 * e}, {"test_acc", 0.2 * e + 0.01},
                     {"train_loss", 2.0 / e}, {"test_loss", 1.9 / e}});
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

TEST(Viz, ManyCurvesGetTheirLegendBesideTheAxes) {
  // Eight rising curves (a comparison): the legend must not cover them, so it sits right of the
  // axes, where each curve's swatch is the only thing in its colour. (Three or more do.)
  Panel p{"test accuracy", "epoch", {}};
  for (int i = 0; i < 8; ++i) p.curves.push_back({"model-" + std::to_string(i), {1, 2, 3}, {50.0 + i, 70.0 + i, 90.0 + i}, palette(i)});
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

}  // namespace
}  // namespace gmlp::viz
