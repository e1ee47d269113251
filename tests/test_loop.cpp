// The training loop (src/train/loop.h): gradient accumulation and the per-item keying of random
// draws that makes it exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/rng.h"
#include "nn/config.h"
#include "nn/model.h"
#include "tolerances.h"
#include "train/image_task.h"
#include "train/loop.h"

namespace gmlp {
namespace {

// n random 28×28 gray images of 10 classes: no file needed, and every pixel value occurs.
data::ImageSet random_images(int n, uint64_t seed) {
  data::ImageSet set;
  set.count = n, set.channels = 1, set.height = 28, set.width = 28, set.classes = 10;
  Rng rng(seed);
  set.pixels.resize(size_t(n) * 28 * 28);
  for (auto& p : set.pixels) p = uint8_t(rng.below(256));
  for (int i = 0; i < n; ++i) set.labels.push_back(uint8_t(i % 10));
  for (int k = 0; k < 10; ++k) set.class_names.push_back("c" + std::to_string(k));
  return set;
}

// The gradient of one step on items[0..B) split into K micro-batches, as run_loop takes it.
std::vector<float> step_gradient(Model<float>& model, ImageTask& task, const std::vector<int>& items,
                                 const std::vector<uint64_t>& keys, int K) {
  const int B = int(items.size());
  task.plan(B / K);
  step_gradients(task, task.trainable(), items.data(), keys.data(), B, K);
  return std::vector<float>(model.grads(), model.grads() + model.num_params());
}

// Every per-item draw (crop shift, flip, random erasing) is keyed by the item's position in the
// epoch, so two micro-batches of 32 see the same augmented images as one batch of 64, and their
// gradients, each weighted 1/2, sum to the batch's mean gradient up to summation order.
TEST(GradAccum, MicroBatchesSumToTheBatchGradient) {
  ModelConfig cfg = find_preset("fmnist-ti").config;
  cfg.num_classes = 10, cfg.drop_path = 0;
  auto model = make_model<float>(cfg);
  Rng init(3);
  model->init(init);
  const data::ImageSet set = random_images(64, 5);
  TrainOptions opt;  // crop 2, flips, label smoothing 0.1
  opt.erase_prob = 0.5;
  const data::Normalization norm = data::Normalization::gmlp_default(1);
  ImageTask task(*model, nullptr, set, set, norm, opt);
  std::vector<int> items(64);
  std::iota(items.begin(), items.end(), 0);
  std::reverse(items.begin(), items.end());  // an order, as an epoch's shuffle gives
  std::vector<uint64_t> keys(64);
  for (int p = 0; p < 64; ++p) keys[size_t(p)] = item_key(7, 2, p);

  const std::vector<float> whole = step_gradient(*model, task, items, keys, 1);
  for (int K : {2, 4}) {
    const std::vector<float> split = step_gradient(*model, task, items, keys, K);
    double worst = 0, norm2 = 0;
    for (size_t i = 0; i < whole.size(); ++i) {
      worst = std::max(worst, std::abs(double(split[i]) - whole[i]) / std::max(1.0, std::abs(double(whole[i]))));
      norm2 += double(whole[i]) * whole[i];
    }
    EXPECT_LE(worst, tol::kInvariance) << "K = " << K;
    EXPECT_GT(norm2, 1e-6) << "a zero gradient would pass trivially";
  }
  // The same micro-batches in the same order: the same bits.
  EXPECT_EQ(step_gradient(*model, task, items, keys, 2), step_gradient(*model, task, items, keys, 2));
}

TEST(GradAccum, ItemKeysDependOnSeedEpochAndPosition) {
  EXPECT_EQ(item_key(1, 0, 5), item_key(1, 0, 5));
  EXPECT_NE(item_key(1, 0, 5), item_key(1, 0, 6));
  EXPECT_NE(item_key(1, 0, 5), item_key(1, 1, 5));
  EXPECT_NE(item_key(1, 0, 5), item_key(2, 0, 5));
}

}  // namespace
}  // namespace gmlp
