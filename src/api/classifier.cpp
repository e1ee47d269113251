// The public Classifier (include/gmlp/classifier.h) over the engine: a checkpoint's model under
// an inference memory plan, the checkpoint's normalisation, and a softmax for probabilities.
#include "gmlp/classifier.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/threads.h"
#include "data/transform.h"
#include "io/image.h"
#include "ops/cross_entropy.h"
#include "train/checkpoint.h"

namespace gmlp {

namespace {
constexpr int kBatch = 64;  // images per forward pass of logits()
}

struct Classifier::Impl {
  Checkpoint ck;
  std::vector<float> input;  // one batch, normalised: (kBatch, C, S, S)
};

Classifier::Classifier(const std::string& checkpoint) : Classifier(checkpoint, 0) {}

Classifier::Classifier(const std::string& checkpoint, int size) : impl_(std::make_unique<Impl>()) {
  use_process_threads();
  impl_->ck = load_checkpoint(checkpoint);
  if (size > 0) change_image_size(impl_->ck, checkpoint, size, GridFit::resize);
  impl_->ck.model->plan(kBatch, Mode::infer);
  impl_->ck.model->freeze();  // the weights are packed once, by the first products that meet them
  impl_->input.resize(size_t(kBatch) * channels() * image_size() * image_size());
}
Classifier::~Classifier() = default;
Classifier::Classifier(Classifier&&) noexcept = default;
Classifier& Classifier::operator=(Classifier&&) noexcept = default;

int Classifier::channels() const { return impl_->ck.config.in_chans; }
int Classifier::image_size() const { return impl_->ck.config.img_size; }
int Classifier::num_classes() const { return impl_->ck.config.num_classes; }
const std::vector<std::string>& Classifier::class_names() const { return impl_->ck.class_names; }
const std::vector<std::string>& Classifier::notes() const { return impl_->ck.notes; }

std::vector<float> Classifier::logits(const float* pixels, int n) {
  use_process_threads();
  if (n < 0) fail("failed to classify: ", n, " images (expected a count >= 0)");
  const int C = channels(), S = image_size(), K = num_classes();
  const size_t image = size_t(C) * S * S;
  std::vector<float> out(size_t(n) * K);
  for (int start = 0; start < n; start += kBatch) {
    const int b = std::min(kBatch, n - start);
    for (int i = 0; i < b; ++i)
      data::normalize_image(impl_->input.data() + i * image, pixels + (start + i) * image, C, S, impl_->ck.norm);
    const float* l = impl_->ck.model->infer(impl_->input.data(), b);
    std::copy_n(l, size_t(b) * K, out.begin() + size_t(start) * K);
  }
  return out;
}

std::vector<Prediction> Classifier::classify(const float* pixels, int top) {
  return top_classes(logits(pixels, 1).data(), top);
}

std::vector<Prediction> Classifier::top_classes(const float* logits, int top) const {
  const int K = num_classes();
  std::vector<float> probs(K);
  const int32_t no_label = 0;  // the loss is not needed, only the softmax it writes
  cross_entropy_forward(probs.data(), logits, &no_label, 1, K, 0.f);
  std::vector<int> order(K);
  std::iota(order.begin(), order.end(), 0);
  top = std::clamp(top, 1, K);
  std::partial_sort(order.begin(), order.begin() + top, order.end(), [&](int a, int b) { return probs[a] > probs[b]; });
  std::vector<Prediction> out;
  for (int i = 0; i < top; ++i) {
    const int k = order[i];
    out.push_back({k, k < int(class_names().size()) ? class_names()[k] : cat("class ", k), probs[k]});
  }
  return out;
}

std::vector<Prediction> Classifier::classify(const std::string& image_file, int top) {
  const std::vector<float> pixels = img::load_image(image_file, channels(), image_size(), image_size());
  return classify(pixels.data(), top);
}

}  // namespace gmlp
