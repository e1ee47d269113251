// A model run at another image size (nn/resample.h): what the resampling keeps exactly, and what
// it refuses.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "core/rng.h"
#include "data/image_folder.h"
#include "files.h"
#include "nn/model.h"
#include "nn/resample.h"

namespace gmlp {
namespace {

ModelConfig gmlp_at(int img_size) {
  ModelConfig c;
  c.img_size = img_size, c.patch_size = 4, c.depth = 1, c.dim = 4, c.ffn = 8, c.num_classes = 3;
  return c;
}

std::map<std::string, std::vector<float>> by_name(const ModelConfig& c, const std::vector<float>& w) {
  std::map<std::string, std::vector<float>> out;
  for (const ParamInfo& p : param_table(c)) out[p.name].assign(w.begin() + p.offset, w.begin() + p.offset + p.numel);
  return out;
}

std::vector<float> random_weights(const ModelConfig& c, uint64_t seed) {
  int64_t n = 0;
  for (const ParamInfo& p : param_table(c)) n = std::max(n, p.offset + p.numel);
  Rng rng(seed);
  std::vector<float> w(static_cast<size_t>(n));
  for (float& x : w) x = float(rng.normal());
  return w;
}

const std::string kW = "blocks.0.mlp_channels.gate.proj.weight", kB = "blocks.0.mlp_channels.gate.proj.bias";

TEST(Resample, TheSameSizeKeepsEveryWeight) {
  const ModelConfig c = gmlp_at(28);
  const std::vector<float> w = random_weights(c, 1);
  EXPECT_EQ(resample_weights(c, w.data(), c, GridFit::resize), w);
  EXPECT_EQ(resample_weights(c, w.data(), c, GridFit::pad), w);
}

// Padding by whole patches moves every token by the same offset: the kernels of the old tokens
// are copied exactly, a weight between two old tokens as it was; the channel weights unchanged.
TEST(Resample, PaddingByWholePatchesCopiesTheKernelsOfTheOldTokens) {
  const ModelConfig from = gmlp_at(16), to = gmlp_at(24);  // 4×4 tokens → 6×6, one token of border
  const std::vector<float> w = random_weights(from, 2);
  const auto a = by_name(from, w), b = by_name(to, resample_weights(from, w.data(), to, GridFit::pad));
  for (const auto& [name, v] : a) {
    if (name == kW || name == kB) continue;
    EXPECT_EQ(b.at(name), v) << name;
  }
  for (int i = 0; i < 16; ++i) {
    const int i2 = (i / 4 + 1) * 6 + i % 4 + 1;
    EXPECT_EQ(b.at(kB)[i2], a.at(kB)[i]);
    for (int j = 0; j < 16; ++j) EXPECT_EQ(b.at(kW)[i2 * 36 + (j / 4 + 1) * 6 + j % 4 + 1], a.at(kW)[i * 16 + j]);
  }
  // A border token takes the kernel of its nearest old token, over the same offsets: zero where
  // that kernel would reach beyond the old grid.
  EXPECT_EQ(b.at(kW)[0 * 36 + 0], a.at(kW)[0 * 16 + 0]);  // corner, offset (0, 0): old (0,0) → (0,0)
  EXPECT_EQ(b.at(kW)[0 * 36 + 7], a.at(kW)[0 * 16 + 5]);  // offset (1, 1): old (0,0) → (1,1)
  EXPECT_EQ(b.at(kW)[0 * 36 + 5], 0.f);                   // offset (0, 5): beyond the old grid
}

// A kernel that is the same linear function of the offset for every output token, W[i, j] =
// α + β·Δy + γ·Δx, is one that bilinear sampling reproduces exactly: resized from 7×7 to 8×8
// tokens, it is (G/G')²·(α + (G/G')·(β·Δy' + γ·Δx')) wherever the samples stay on the old grid.
TEST(Resample, ResizingScalesALinearKernelsOffsetsAndMass) {
  const ModelConfig from = gmlp_at(28), to = gmlp_at(32);
  std::vector<float> w = random_weights(from, 3);
  const double alpha = 0.5, beta = 0.25, gamma = -0.125;
  for (const ParamInfo& p : param_table(from)) {
    if (p.name != kW) continue;
    for (int i = 0; i < 49; ++i)
      for (int j = 0; j < 49; ++j) {
        const int dr = j / 7 - i / 7, dc = j % 7 - i % 7;  // patch j's offset from patch i on the 7 × 7 grid
        w[size_t(p.offset + i * 49 + j)] = float(alpha + beta * dr + gamma * dc);
      }
  }
  const auto b = by_name(to, resample_weights(from, w.data(), to, GridFit::resize));
  const double s = 7.0 / 8.0;
  int checked = 0;
  for (int yi = 3; yi <= 4; ++yi)
    for (int xi = 3; xi <= 4; ++xi)
      for (int dy = -2; dy <= 2; ++dy)
        for (int dx = -2; dx <= 2; ++dx) {
          const int i2 = yi * 8 + xi, j2 = (yi + dy) * 8 + xi + dx;
          const double want = s * s * (alpha + s * (beta * dy + gamma * dx));
          EXPECT_NEAR(b.at(kW)[size_t(i2 * 64 + j2)], want, 1e-6) << "token " << i2 << " to " << j2;
          ++checked;
        }
  EXPECT_EQ(checked, 100);
}

TEST(Resample, KindsWhoseTokenMixingIsNoKernelAndSizesOffThePatchGridAreRefused) {
  ModelConfig mixer = gmlp_at(28);
  mixer.model = ModelKind::mixer;
  test::expect_error([&] { check_resizable(mixer, 32); },
                     {"a mixer model cannot change its image size (28 to 32 px)", "gmlp, amlp, resmlp, vit and cnn"});
  test::expect_error([&] { check_resizable(gmlp_at(28), 30); },
                     {"invalid image size 30", "a multiple of the model's patch size, 4"});
  test::expect_error([&] { parse_grid_fit("stretch"); }, {"invalid fit 'stretch'", "resize or pad"});
  ModelConfig cnn = gmlp_at(28);
  cnn.model = ModelKind::cnn, cnn.dim = 4, cnn.depth = 1;
  EXPECT_NO_THROW(check_resizable(cnn, 30));  // nothing of it is tied to the image size
}

TEST(Resample, PaddedImagesSitAtTheCentreOnBlackAndResizedOnesKeepTheirMean) {
  data::ImageSet set;
  set.count = 1, set.channels = 1, set.height = set.width = 2, set.classes = 1;
  set.pixels = {10, 20, 30, 40};
  set.labels = {0};
  const data::ImageSet padded = data::fit_images(set, 4, true);
  EXPECT_EQ(padded.pixels, (std::vector<uint8_t>{0, 0, 0, 0, 0, 10, 20, 0, 0, 30, 40, 0, 0, 0, 0, 0}));
  EXPECT_EQ(data::fit_images(padded, 2, true).pixels, set.pixels);  // a smaller size crops the centre
  data::ImageSet flat = set;
  flat.pixels = {77, 77, 77, 77};
  const data::ImageSet resized = data::fit_images(flat, 5, false);
  ASSERT_EQ(resized.pixels.size(), 25u);
  for (uint8_t p : resized.pixels) EXPECT_EQ(p, 77);
}

}  // namespace
}  // namespace gmlp
