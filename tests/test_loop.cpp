// The training loop (src/train/loop.h): gradient accumulation and the per-item keying of random
// draws that makes it exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

#include "core/rng.h"
#include "nn/config.h"
#include "nn/model.h"
#include "nn/text_model.h"
#include "text/tokenizer.h"
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
  StepGradients(task, B, K).run(items.data(), keys.data());
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

// What the data-parallel step relies on to sum gradients while backward runs: when backward
// reports grads_ready(from), no gradient at an offset >= from changes afterwards, and the reports
// walk down the array. Every image kind, and the text models with both heads.
template <class M>
void expect_reports_final(M& model, const std::function<void()>& backward) {
  const int64_t P = model.num_params();
  std::vector<std::pair<int64_t, std::vector<float>>> seen;  // each report: from, and grads[from..P)
  model.set_grads_ready([&](int64_t from) {
    ASSERT_TRUE(from >= 0 && from <= P);
    seen.emplace_back(from, std::vector<float>(model.grads() + from, model.grads() + P));
  });
  model.zero_grad();
  backward();
  model.set_grads_ready(nullptr);
  ASSERT_GE(seen.size(), 2u) << "backward reported too little to overlap anything";
  int64_t last = P;
  for (const auto& [from, tail] : seen) {
    EXPECT_LE(from, last) << "the reports must walk down the array";
    last = from;
    EXPECT_EQ(tail, std::vector<float>(model.grads() + from, model.grads() + P))
        << "a gradient at an offset >= " << from << " changed after it was reported final";
  }
  double norm2 = 0;
  for (int64_t i = 0; i < P; ++i) norm2 += double(model.grads()[i]) * model.grads()[i];
  EXPECT_GT(norm2, 0) << "a zero gradient would pass trivially";
}

TEST(GradsReady, ReportedGradientsAreFinalForEveryImageKind) {
  for (const Preset& preset : presets()) {
    if (preset.name.rfind("fmnist-", 0) != 0) continue;
    SCOPED_TRACE(preset.name);
    ModelConfig cfg = preset.config;
    cfg.num_classes = 10, cfg.drop_path = 0.1;
    auto model = make_model<float>(cfg);
    Rng rng(4);
    model->init(rng);
    const int B = 3;
    std::vector<float> x(size_t(B * cfg.in_chans * cfg.img_size * cfg.img_size)), dlogits(size_t(B * 10));
    for (auto& v : x) v = float(rng.normal());
    for (auto& v : dlogits) v = float(rng.normal());
    model->plan(B);
    expect_reports_final(*model, [&] {
      model->forward(x.data(), B, &rng);
      model->backward(dlogits.data());
    });
  }
}

// An inference-only process (eval, predict, serve, the library) holds no gradients: they come
// with the first training plan.
TEST(Plan, GradientsComeWithATrainingPlanOnly) {
  ModelConfig cfg = find_preset("fmnist-s").config;
  auto model = make_model<float>(cfg);
  model->plan(8, Mode::infer);
  EXPECT_EQ(model->grads(), nullptr);
  model->plan(8);
  ASSERT_NE(model->grads(), nullptr);
  for (int64_t i = 0; i < model->num_params(); ++i) ASSERT_EQ(model->grads()[i], 0.f);
  TextConfig text = find_text_preset("kjv-gmlp").config;
  text.depth = 1, text.vocab_size = 50;
  TextModel<float> lm(text);
  lm.plan(2, Mode::infer);
  EXPECT_EQ(lm.grads(), nullptr);
}

TEST(GradsReady, ReportedGradientsAreFinalForTextModels) {
  for (const char* name : {"kjv-gmlp", "kjv-amlp", "kjv-bert", "kjv-bert-rel"}) {
    SCOPED_TRACE(name);
    TextConfig cfg = find_text_preset(name).config;
    cfg.depth = 2, cfg.dim = 16, cfg.ffn = 32, cfg.seq_len = 8, cfg.heads = 2, cfg.vocab_size = 50;
    cfg.num_classes = 2, cfg.segments = true;
    TextModel<float> model(cfg);
    Rng rng(5);
    model.init(rng);
    const int B = 2, N = cfg.seq_len;
    std::vector<int32_t> ids(size_t(B * N));
    for (auto& id : ids) id = int32_t(5 + rng.below(45));
    ids[0] = text::Tokenizer::kCls;
    const std::vector<int64_t> positions = {1, 3, N + 2};
    const std::vector<int32_t> labels = {7, 9, 11};
    std::vector<float> cls_dlogits(size_t(B * 2));
    for (auto& v : cls_dlogits) v = float(rng.normal());
    model.plan(B);
    expect_reports_final(model, [&] {
      model.encode(ids.data(), B, &rng);
      model.classify();
      model.mlm(positions.data(), labels.data(), int64_t(positions.size()), true, cls_dlogits.data());
    });
  }
}

}  // namespace
}  // namespace gmlp
