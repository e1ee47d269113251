// The public Classifier (include/gmlp/classifier.h) against the engine it wraps: the same logits
// as the model's own forward on the same normalised images, across its batches of 64; top-k in
// order of the softmax; an image file classified as its decoded pixels; one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "check.h"
#include "files.h"
#include "gmlp/classifier.h"
#include "io/image.h"
#include "nn/model.h"
#include "tolerances.h"
#include "train/checkpoint.h"

namespace gmlp {
namespace {

struct Saved {
  ModelConfig config;
  std::string path;
  std::unique_ptr<Model<float>> model;
  data::Normalization norm{{0.3f}, {0.6f}};  // not timm's 0.5, so that its use shows
};

// A random fmnist-ti-like model at 12 × 12 (9 tokens), saved with five class names.
Saved save_model(const std::string& name) {
  Saved s;
  s.config.img_size = 12, s.config.patch_size = 4, s.config.depth = 2, s.config.dim = 16;
  s.config.ffn = 32, s.config.num_classes = 5;
  s.model = make_model<float>(s.config);
  Rng rng(3);
  s.model->init(rng);
  for (int64_t i = 0; i < s.model->num_params(); ++i) s.model->weights()[i] += 0.05f * float(rng.normal());
  s.path = test::tmp_path(name);
  save_checkpoint(s.path, *s.model, s.norm, {"a", "b", "c", "d", "e"});
  return s;
}

TEST(Classifier, LogitsMatchTheModelAcrossBatches) {
  Saved s = save_model("ck.safetensors");
  Classifier c(s.path);
  EXPECT_EQ(c.channels(), 1);
  EXPECT_EQ(c.image_size(), 12);
  EXPECT_EQ(c.num_classes(), 5);
  EXPECT_EQ(c.class_names().back(), "e");
  const int n = 70;  // more than one of the classifier's batches of 64
  Rng rng(5);
  std::vector<float> pixels(size_t(n) * 144), normalised(pixels.size());
  for (auto& p : pixels) p = float(rng.uniform());
  for (size_t i = 0; i < pixels.size(); ++i) normalised[i] = (pixels[i] - 0.3f) / 0.6f;
  s.model->plan(n, Mode::infer);
  const float* expected = s.model->infer(normalised.data(), n);
  const std::vector<float> got = c.logits(pixels.data(), n);
  ASSERT_EQ(got.size(), size_t(n) * 5);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], tol::kInvariance) << i;

  // The top three of image 69, most probable first, are the three largest logits.
  const std::vector<Prediction> top = c.classify(pixels.data() + 69 * 144, 3);
  ASSERT_EQ(top.size(), 3u);
  std::vector<int> order = {0, 1, 2, 3, 4};
  const float* l = expected + 69 * 5;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
  double z = 0;
  for (int k = 0; k < 5; ++k) z += std::exp(double(l[k]) - l[order[0]]);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(top[i].label, order[i]);
    EXPECT_EQ(top[i].name, std::string(1, char('a' + order[i])));
    EXPECT_NEAR(top[i].probability, std::exp(double(l[order[i]]) - l[order[0]]) / z, 1e-6);
  }
  EXPECT_EQ(c.classify(pixels.data(), 99).size(), 5u);  // top is capped at the class count
}

TEST(Classifier, ClassifiesAnImageFileAsItsPixels) {
  Saved s = save_model("ck.safetensors");
  Classifier c(s.path);
  std::vector<uint8_t> gray(144);
  for (int i = 0; i < 144; ++i) gray[i] = uint8_t(i * 7 % 251);
  const std::string png = test::tmp_path("image.png");
  img::write_png(png, 12, 12, 1, gray.data());
  std::vector<float> pixels(144);
  for (int i = 0; i < 144; ++i) pixels[i] = gray[i] / 255.0f;
  const Prediction from_file = c.classify(png, 1).front(), from_pixels = c.classify(pixels.data(), 1).front();
  EXPECT_EQ(from_file.label, from_pixels.label);
  EXPECT_FLOAT_EQ(from_file.probability, from_pixels.probability);
}

// set_threads() in one thread governs a Classifier called from a thread the application started
// itself, where OpenMP's own count would be the runtime's default (every CPU).
TEST(Classifier, SetThreadsGovernsTheApplicationsOwnThreads) {
  Saved s = save_model("ck.safetensors");
  Classifier c(s.path);
  const std::vector<float> pixels(144, 0.5f);
  const std::vector<float> expected = c.logits(pixels.data(), 1);
  const int saved = num_threads();
  for (int n : {1, 2, 3}) {
    SCOPED_TRACE(n);
    set_threads(n);
    std::vector<float> got;
    EXPECT_EQ(test::team_after_call_on_new_thread([&] { got = c.logits(pixels.data(), 1); }), n);
    EXPECT_TRUE(test::close("logits", got.data(), expected.data(), 5, tol::kInvariance));
  }
  set_threads(saved);
}

TEST(Classifier, FailuresAreOneLineRuntimeErrors) {
  const std::string missing = test::tmp_path("missing.safetensors");
  try {
    Classifier c(missing);
    ADD_FAILURE() << "loading a missing checkpoint should throw";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(missing), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  Saved s = save_model("ck.safetensors");
  Classifier c(s.path);
  EXPECT_THROW(c.classify(test::tmp_path("no-such.png")), std::runtime_error);
}

}  // namespace
}  // namespace gmlp
