// The training loop for image classification: AdamW, warmup + cosine schedule, gradient
// clipping, label smoothing, augmentation (crop, flip, random erasing, Mixup/CutMix with soft
// targets), stochastic depth, per-epoch evaluation, progress on stderr, and
// crash-safe output in one run folder, every epoch committed as one step (run_dir.h):
//   checkpoint.safetensors   the model (timm names) after the last complete epoch
//   train_state.safetensors  AdamW moments, step, epoch, options: what --resume needs
//   metrics.jsonl            one JSON object per finished epoch
//   checkpoint_ema.safetensors  the weights' moving average (--ema), as a checkpoint
// A run is a pure function of (options, seed): each epoch's shuffling, augmentation and
// drop-path draws come from an RNG seeded by (seed, epoch), so a resumed run continues exactly
// as the uninterrupted one would have.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "nn/config.h"
#include "train/loop.h"

namespace gmlp {

// gmlp train's options: the shared ones (loop.h) with train's defaults, and its own.
struct TrainOptions : RunOptions {
  TrainOptions() {
    out_dir = "runs/default";
    batch_size = 128, lr = 2e-3, weight_decay = 0.05;
  }
  std::string data_dir;  // for data::load_images (default: the Debian package's Fashion-MNIST)
  double label_smoothing = 0.1;
  int crop_padding = 2;  // random-crop shift in pixels; 0 disables
  bool hflip = true;
  // DeiT's regularisation (Touvron et al. 2021; timm defaults in brackets). Off unless set.
  double mixup_alpha = 0;      // Mixup λ ~ Beta(α, α) [0.8]
  double cutmix_alpha = 0;     // CutMix λ ~ Beta(α, α) [1.0]
  double mix_prob = 1.0;       // chance a batch is mixed when either is on [1.0]
  double switch_prob = 0.5;    // CutMix rather than Mixup when both are on [0.5]
  double erase_prob = 0;       // random erasing, per image [0.25]
  double ema_decay = 0;        // moving average of the weights, evaluated and saved each epoch
                               // (0: off) [--model-ema 0.99996, for 300 epochs at batch 1024]
  std::string preset;          // the preset the run started from, for the record (gmlp info)
  std::string init;            // a checkpoint whose weights the run starts from (its architecture, at
                               // the config's img_size; a head of other classes starts afresh)
  std::string fit = "resize";  // how the data's images meet a model of another size (resize, pad)

  nlohmann::json to_json() const;
  static TrainOptions from_json(const nlohmann::json& j);
};

// Trains a new model of `config`, or, when resume is true, continues the run in options.out_dir
// from its last checkpoint (its own config and options win, except epochs which may grow). A new
// run refuses a folder that holds one unless `overwrite`. SIGINT or SIGTERM stops it between two
// steps with gmlp::Interrupted (run_dir.h), the last complete epoch saved.
TrainResult train(const ModelConfig& config, const TrainOptions& options, bool resume, bool overwrite = false);

// For gmlp compare, which runs its command again to continue: true when options.out_dir holds a
// run of this config and these options (epochs aside, which may grow), to continue with
// train(..., resume = true); false when it holds none. A run of another config or other options
// is a one-line gmlp::Error naming the first difference.
bool holds_same_run(const ModelConfig& config, const TrainOptions& options);

}  // namespace gmlp
