#include "train/image_task.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "ops/cross_entropy.h"
#include "ops/soft_cross_entropy.h"
#include "train/checkpoint.h"
#include "train/eval_subset.h"
#include "train/evaluate.h"
#include "train/optimizer.h"
#include "train/progress.h"

namespace gmlp {

ImageTask::ImageTask(Model<float>& model, Model<float>* ema, const data::ImageSet& train_set,
                     const data::ImageSet& test_set, const data::Normalization& norm, const TrainOptions& opt)
    : model_(model),
      ema_(ema),
      train_(train_set),
      test_(test_set),
      norm_(norm),
      opt_(opt),
      aug_{opt.crop_padding, opt.hflip},
      erase_{float(opt.erase_prob)},
      test_items_(
          eval_subset(std::vector<int>(test_set.labels.begin(), test_set.labels.end()), opt.eval_limit, opt.seed)),
      subset_(subset_label(int64_t(test_items_.size()), test_set.count)) {
  mix_.mixup_alpha = float(opt.mixup_alpha), mix_.cutmix_alpha = float(opt.cutmix_alpha);
  mix_.prob = float(opt.mix_prob), mix_.switch_prob = float(opt.switch_prob);
  mix_.smoothing = float(opt.label_smoothing);
  const std::string whole = eval_limit_note(opt.eval_limit, test_set.count, "test images");
  if (!whole.empty()) std::fprintf(stderr, "gmlp: %s\n", whole.c_str());
}

Trainable ImageTask::trainable() { return {model_.weights(), model_.grads(), model_.num_params(), &model_.params()}; }

void ImageTask::plan(int B) {
  model_.plan(B);
  if (ema_) ema_->plan(B, Mode::infer);
  const ModelConfig& c = model_.config();
  const int64_t K = c.num_classes, image = int64_t(c.in_chans) * c.img_size * c.img_size;
  input_.resize(size_t(B * image)), probs_.resize(size_t(B * K)), dlogits_.resize(size_t(B * K));
  targets_.resize(size_t(B * K)), labels_.resize(size_t(B));
  raw_.resize(train_.decode ? size_t(B * image) : 0);
}

std::string ImageTask::describe(int64_t n) const {
  char mflops[32];
  std::snprintf(mflops, sizeof mflops, "%.1f", model_.flops_per_image() / 1e6);
  return cat(thousands(model_.num_trainable()), " params, ", mflops, " MFLOP/image, ", thousands(n), " train / ",
             subset_.empty() ? thousands(int64_t(test_items_.size())) : subset_, " test images");
}

StepStats ImageTask::step(const int* items, const uint64_t* keys, int B, Rng& rng, float grad_scale) {
  const ModelConfig& c = model_.config();
  const int64_t K = c.num_classes, C = c.in_chans, S = c.img_size, image = C * S * S;
  for (int i = 0; i < B; ++i) labels_[size_t(i)] = train_.labels[size_t(items[i])];
  data::for_each_image(
      train_, B, [items](int64_t i) { return int64_t(items[i]); }, raw_.data(),
      [&](int64_t i, const uint8_t* pixels) {
        Rng item_rng(keys[i]);
        float* x = input_.data() + i * image;
        data::augment_image(x, pixels, int(C), int(S), norm_, aug_, item_rng);
        if (erase_.enabled()) data::random_erase(x, int(C), int(S), erase_, item_rng);
      });
  // Mixup/CutMix train on soft targets; without them, on the labels (the same numbers as soft
  // targets of smoothed one-hots, one pass fewer).
  const bool mixed = mix_.enabled();
  if (mixed) data::mix_batch(input_.data(), B, int(C), int(S), targets_.data(), labels_.data(), int(K), mix_, rng);
  const float* logits = model_.forward(input_.data(), B, &rng);
  const float smoothing = float(opt_.label_smoothing);
  const float loss = mixed ? soft_cross_entropy_forward(probs_.data(), logits, targets_.data(), B, K)
                           : cross_entropy_forward(probs_.data(), logits, labels_.data(), B, K, smoothing);
  StepStats r{double(loss) * B, 0, B};
  for (int i = 0; i < B; ++i) {
    const float* row = logits + i * K;
    r.correct += (std::max_element(row, row + K) - row) == labels_[size_t(i)];
  }
  if (mixed)
    soft_cross_entropy_backward(dlogits_.data(), probs_.data(), targets_.data(), B, K);
  else
    cross_entropy_backward(dlogits_.data(), probs_.data(), labels_.data(), B, K, smoothing);
  if (grad_scale != 1.f)
    for (int64_t i = 0; i < int64_t(B) * K; ++i) dlogits_[size_t(i)] *= grad_scale;
  model_.backward(dlogits_.data());
  return r;
}

void ImageTask::after_update() {
  if (ema_) ema_update(ema_->weights(), model_.weights(), model_.num_params(), opt_.ema_decay);
}

nlohmann::json ImageTask::evaluate(dist::Communicator& comm) {
  const EvalResult ev =
      gmlp::evaluate(model_, test_, norm_, {.items = &test_items_, .progress = "test", .comm = &comm});
  nlohmann::json m = {{"test_loss", ev.loss},
                      {"test_acc", ev.accuracy},
                      {"test_count", ev.count},
                      {"test_total", ev.total},
                      {"eval_seconds", ev.seconds}};
  if (ema_) {
    const EvalResult e =
        gmlp::evaluate(*ema_, test_, norm_, {.items = &test_items_, .progress = "test, moving average", .comm = &comm});
    m["test_loss_ema"] = e.loss;
    m["test_acc_ema"] = e.accuracy;
    m["eval_seconds"] = ev.seconds + e.seconds;
  }
  return m;
}

void ImageTask::report(const nlohmann::json& m, int epochs) const {
  char ema_line[48] = "";
  if (m.contains("test_acc_ema"))
    std::snprintf(ema_line, sizeof ema_line, "  ema acc %.2f%%", 100 * m["test_acc_ema"].get<double>());
  std::fprintf(stderr, "epoch %d/%d  train loss %.4f acc %.2f%%  test%s loss %.4f acc %.2f%%%s  (%.0f img/s, %s)\n",
               m["epoch"].get<int>(), epochs, m["train_loss"].get<double>(), 100 * m["train_acc"].get<double>(),
               subset_.empty() ? "" : (" (" + subset_ + ")").c_str(), m["test_loss"].get<double>(),
               100 * m["test_acc"].get<double>(), ema_line, m["images_per_s"].get<double>(),
               format_duration(m["seconds"].get<double>()).c_str());
}

std::vector<EpochFile> ImageTask::checkpoints(const std::map<std::string, std::string>& marks) {
  std::vector<EpochFile> files = {{RunFiles::kCheckpoint, [this, marks](const std::string& path) {
                                     save_checkpoint(path, model_, norm_, train_.class_names, marks);
                                   }}};
  if (ema_)
    files.push_back({RunFiles::kEma, [this, marks](const std::string& path) {
                       save_checkpoint(path, *ema_, norm_, train_.class_names, marks);
                     }});
  return files;
}

}  // namespace gmlp
