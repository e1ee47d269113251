#include "train/evaluate.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "core/error.h"
#include "data/image_folder.h"
#include "ops/cross_entropy.h"
#include "train/progress.h"

namespace gmlp {

data::ImageSet fit_to_model(data::ImageSet set, const ModelConfig& cfg, GridFit fit) {
  if (set.channels != cfg.in_chans || (set.height == cfg.img_size && set.width == cfg.img_size)) return set;
  return data::fit_images(set, cfg.img_size, fit == GridFit::pad);
}

void check_compatible(const ModelConfig& cfg, const data::ImageSet& set, const std::string& source) {
  if (set.channels != cfg.in_chans || set.height != cfg.img_size || set.width != cfg.img_size)
    fail("data '", source, "' has ", set.channels, "×", set.height, "×", set.width, " images, but the model expects ",
         cfg.in_chans, "×", cfg.img_size, "×", cfg.img_size);
  if (set.classes > cfg.num_classes)
    fail("data '", source, "' has ", set.classes, " classes, but the model has only ", cfg.num_classes, " outputs");
}

EvalResult evaluate(Model<float>& model, const data::ImageSet& set, const data::Normalization& norm,
                    const EvalOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const ModelConfig& cfg = model.config();
  const std::vector<int64_t>* items = options.items;
  const bool flip_tta = options.flip_tta;
  std::vector<float>* logits = options.logits;
  const int n = items ? int(items->size()) : set.count;
  auto image = [&](int64_t k) { return items ? (*items)[size_t(k)] : k; };  // k-th evaluated
  const int64_t B = model.planned_batch(), K = cfg.num_classes, C = cfg.in_chans, S = cfg.img_size;
  const int64_t image_size = C * S * S;
  std::vector<float> input(B * image_size), probs(B * K), mean_logits(flip_tta ? B * K : 0);
  std::vector<int32_t> labels(B);
  std::vector<uint8_t> raw(set.decode ? B * image_size : 0);  // a batch's images, where the set is read on demand
  if (logits) logits->assign(int64_t(n) * K, 0.f);
  EvalResult r;
  r.count = n;
  r.total = set.count;
  std::unique_ptr<EvalProgress> progress;
  if (options.progress) progress = std::make_unique<EvalProgress>(options.progress, n);
  dist::SingleProcess alone;
  dist::Communicator& comm = options.comm ? *options.comm : alone;
  GMLP_CHECK(!logits || comm.size() == 1);
  // Per batch: the loss summed over its images, and its hits.
  dist::BatchShares shares(comm, (n + B - 1) / B, 2);
  int64_t correct = 0;  // this rank's, for the progress line
  for (int start = 0; start < n; start += int(B)) {
    if (!shares.mine(start / B)) continue;
    const int64_t b = std::min<int64_t>(B, n - start);
    for (int64_t i = 0; i < b; ++i) {
      const int64_t at = image(start + i);
      if (at < 0 || at >= set.count) fail("failed to evaluate: image ", at, " of a set of ", set.count);
      labels[i] = set.labels[at];
    }
    data::for_each_image(
        set, b, [&](int64_t i) { return image(start + i); }, raw.data(),
        [&](int64_t i, const uint8_t* pixels) {
          data::normalize_image(input.data() + i * image_size, pixels, int(C), int(S), norm);
        });
    const float* out = model.infer(input.data(), b);
    if (flip_tta) {
      std::copy(out, out + b * K, mean_logits.data());
#pragma omp parallel for schedule(static)
      for (int64_t row = 0; row < b * C * S; ++row) std::reverse(input.data() + row * S, input.data() + (row + 1) * S);
      out = model.infer(input.data(), b);
      for (int64_t i = 0; i < b * K; ++i) mean_logits[i] = 0.5f * (mean_logits[i] + out[i]);
      out = mean_logits.data();
    }
    double* sums = shares.row(start / B);
    sums[0] = double(cross_entropy_forward(probs.data(), out, labels.data(), b, K, 0.f)) * b;
    for (int64_t i = 0; i < b; ++i) {
      const float* row = out + i * K;
      sums[1] += (std::max_element(row, row + K) - row) == labels[i];
    }
    correct += int64_t(sums[1]);
    if (logits) std::copy(out, out + b * K, logits->data() + int64_t(start) * K);
    if (progress) progress->update(start + b, correct);
  }
  const std::vector<double> total = shares.total();
  r.loss = n ? total[0] / n : 0;
  r.accuracy = n ? total[1] / n : 0;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace gmlp
