// The run folder every trainer keeps (image classification, MLM pretraining, finetuning):
//   checkpoint.safetensors   the model after the last complete epoch
//   train_state.safetensors  AdamW moments and the marks --resume needs (epoch, step, options)
//   checkpoint_ema.safetensors  the weights' moving average, when the run keeps one (--ema)
//   metrics.jsonl            one JSON object per finished epoch
//   run.json, .lock          the manifest of the last committed epoch and the folder's lock
// all written together after every epoch as one step (run_dir.h), and the per-epoch RNG seeding
// that makes a resumed run continue exactly as an uninterrupted one.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "train/optimizer.h"
#include "train/run_dir.h"

namespace gmlp {

struct RunFiles {
  static constexpr const char* kCheckpoint = "checkpoint.safetensors";
  static constexpr const char* kState = "train_state.safetensors";
  static constexpr const char* kMetrics = "metrics.jsonl";
  static constexpr const char* kEma = "checkpoint_ema.safetensors";
  std::string checkpoint, state, metrics, ema;  // their paths in the folder
  explicit RunFiles(const std::string& dir);
};

// The seed of epoch e's shuffling, augmentation, masking and drop-path draws.
uint64_t epoch_seed(uint64_t seed, int epoch);

// What train_state.safetensors holds besides the moments. (clang-tidy sees nlohmann::json's noexcept
// default constructor delegate to one that may throw: it cannot, for the null it makes.)
struct RunState {  // NOLINT(bugprone-exception-escape)
  int epoch = 0;
  int64_t step = 0, adamw_steps = 0;
  nlohmann::json options;
  std::vector<float> m, v;  // AdamW moments (read back only)
};

// Commits epoch state.epoch to the run folder as one step (RunDir::commit): the state (the
// moments, and state's marks), the `checkpoints` (the model's, the moving average's) and
// metrics.jsonl, whose rows are `metrics`.
void save_epoch(RunDir& run, AdamW<float>& opt, const RunState& state, const std::vector<nlohmann::json>& metrics,
                std::vector<EpochFile> checkpoints);
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
