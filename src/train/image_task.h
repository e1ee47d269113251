// Image classification as a task of the training loop (loop.h): random crop and flip, random
// erasing and Mixup/CutMix with soft targets, label smoothing, the weights' moving average, and
// evaluation on the test split (or --eval-limit of it) after each epoch.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/erase.h"
#include "data/image_folder.h"
#include "data/mix.h"
#include "data/transform.h"
#include "nn/model.h"
#include "train/loop.h"
#include "train/trainer.h"

namespace gmlp {

class ImageTask final : public Task {
 public:
  // ema: the moving average of model's weights, updated after every step (nullptr: none kept).
  // Everything given must outlive the task.
  ImageTask(Model<float>& model, Model<float>* ema, const data::ImageSet& train_set, const data::ImageSet& test_set,
            const data::Normalization& norm, const TrainOptions& options);

  Trainable trainable() override;
  int64_t items() const override { return train_.count; }
  const char* unit() const override { return "image"; }
  void plan(int B) override;
  std::string describe(int64_t train_items) const override;
  double flops_per_item() const override { return 3.0 * model_.flops_per_image(); }  // forward + 2x backward
  StepStats step(const int* items, const uint64_t* keys, int B, Rng& rng, float grad_scale) override;
  void set_grads_ready(std::function<void(int64_t from)> ready) override { model_.set_grads_ready(std::move(ready)); }
  void after_update() override;
  nlohmann::json evaluate(dist::Communicator& comm) override;
  void report(const nlohmann::json& row, int epochs) const override;
  std::vector<EpochFile> checkpoints(const std::map<std::string, std::string>& marks) override;

 private:
  Model<float>& model_;
  Model<float>* ema_;
  const data::ImageSet& train_;
  const data::ImageSet& test_;
  const data::Normalization norm_;
  const TrainOptions& opt_;
  const data::Augment aug_;
  const data::EraseConfig erase_;
  data::MixConfig mix_;
  const std::vector<int64_t> test_items_;
  const std::string subset_;
  std::vector<float> input_, probs_, dlogits_, targets_;
  std::vector<uint8_t> raw_;  // a micro-batch's images, where the training set is read on demand
  std::vector<int32_t> labels_;
};

}  // namespace gmlp
