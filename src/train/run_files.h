// The run folder every trainer keeps (image classification, MLM pretraining, finetuning):
//   checkpoint.safetensors   the model, written atomically after every epoch
//   train_state.safetensors  AdamW moments and the marks --resume needs (epoch, step, options)
//   checkpoint_ema.safetensors  the weights' moving average, when the run keeps one (--ema)
//   metrics.jsonl            one JSON object per finished epoch
// and the per-epoch RNG seeding that makes a resumed run continue exactly as an uninterrupted one.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "train/optimizer.h"

namespace gmlp {

struct RunFiles {
  std::string checkpoint, state, metrics, ema;
  explicit RunFiles(const std::string& dir);
};

// The seed of epoch e's shuffling, augmentation, masking and drop-path draws.
uint64_t epoch_seed(uint64_t seed, int epoch);

// What train_state.safetensors holds besides the moments.
struct RunState {
  int epoch = 0;
  int64_t step = 0, adamw_steps = 0;
  nlohmann::json options;
  std::vector<float> m, v;  // AdamW moments (read back only)
};

// Writes the state (first: a crash between it and the checkpoint leaves a checkpoint one epoch
// behind, which read_run_state's caller detects by the epoch marks) and metrics.jsonl.
void save_run_state(const RunFiles& files, AdamW<float>& opt, const RunState& state,
                    const std::vector<nlohmann::json>& metrics);
// Reads the state, and the metrics rows up to its epoch. Throws a one-line gmlp::Error naming
// the file. restore_moments puts the moments into opt, checking they fit the model.
RunState read_run_state(const RunFiles& files, std::vector<nlohmann::json>* metrics);
void restore_moments(const RunFiles& files, const RunState& state, AdamW<float>& opt);

// What a checkpoint records of its run, as its metadata "training" (gmlp info prints it): JSON
// {"epochs": the epochs done, "options": the run's options, "last": the last epoch's figures,
// "best": each accuracy's best over the epochs}. The figures are accuracies, losses,
// perplexities and counts, no timings, so a resumed run's checkpoint equals an uninterrupted
// one's byte for byte.
std::string training_summary(const nlohmann::json& options, const std::vector<nlohmann::json>& metrics);

// The rows of a metrics.jsonl, one JSON object with an "epoch" per line (blank lines skipped).
// Throws a one-line gmlp::Error naming the file and the line that is not one.
std::vector<nlohmann::json> read_metrics(const std::string& path);

}  // namespace gmlp
