// The one training loop of gmlp train, pretrain and finetune: the epoch loop, the learning-rate
// schedule, gradient accumulation, clipping, AdamW, the weights' moving average, the progress
// line, the divergence guard, per-epoch evaluation, the metrics row and the run folder's commit
// (run_dir.h). What differs between the three is a Task: how many items an epoch has, how to run
// forward and backward on some of them, how to evaluate, what to save.
//
// Randomness. A run is a pure function of (options, seed). Epoch e shuffles the item order with
// an RNG seeded by epoch_seed(seed, e); the item at position p of that order draws everything of
// its own (augmentation, erasing, masking) from item_key(seed, e, p); what a micro-batch draws as
// a whole (Mixup/CutMix's λ and partners, drop-path masks) comes from the key of its first item.
// So --grad-accum changes no per-item draw, and a resumed run, which starts at an epoch's first
// step, continues exactly as the uninterrupted one.
//
// Gradient accumulation. --batch-size B is the batch of one optimizer step; --grad-accum K splits
// it into K micro-batches of B/K items, run one after another, whose gradients are summed, each
// micro-batch's loss weighted 1/K: the step's gradient is the mean of the micro-batches' mean
// gradients, as data-parallel training averages its ranks'. Where every micro-batch averages
// over the same number of terms (classification) that is the gradient of the whole batch; the
// masked-LM loss averages over each micro-batch's masked tokens, so there it is the mean of K
// means. BatchNorm normalises with each micro-batch's statistics.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/rng.h"
#include "dist/communicator.h"
#include "nn/model.h"
#include "train/run_dir.h"
#include "train/run_files.h"

namespace gmlp {

// What every training command shares, in its run's options (train_state's "options" JSON,
// flat beside each command's own fields). Defaults are each command's (TrainOptions, LmOptions).
struct RunOptions {
  std::string out_dir;
  int epochs = 10;
  int batch_size = 128;  // items per optimizer step
  int grad_accum = 1;    // micro-batches per step (batch_size / grad_accum items each)
  double lr = 1e-3;      // peak learning rate, reached after warmup
  double min_lr = 1e-5;  // cosine floor
  double warmup_epochs = 1;
  double weight_decay = 0.05;
  double clip_norm = 1.0;  // global gradient norm cap; 0 disables
  uint64_t seed = 0;
  int train_limit = 0;  // train on N items only (0: all)
  int eval_limit = 0;   // evaluate on N items drawn by the seed (eval_subset.h), the same every epoch (0: all)
  std::string precision = "f32";  // matrix products: f32, or bf16 with fp32 accumulation and master weights
  // Data-parallel: the gradients are summed over the ranks in chunks of this many MB, each started
  // as soon as backward has finished it (0: one sum after backward). Not part of a run's record:
  // the sums are the same bits whatever the chunks.
  double bucket_mb = 1;
};

// validate_run_options (guards.h) checks these before a run touches the disk.

struct TrainResult {
  double final_test_acc = 0, best_test_acc = 0, seconds = 0;
  double final_test_acc_ema = -1;  // the weights' moving average at the end; -1: none kept
  int epochs_run = 0;
};

// The seed of the random draws of the item at position `position` of epoch `epoch`'s order.
uint64_t item_key(uint64_t seed, int epoch, int64_t position);

// Sums over the items (or masked tokens) of a step or an epoch; aux_*: the same of a second
// objective beside the first, when the task has one (Task::aux_name).
struct StepStats {
  double loss_sum = 0;  // the loss summed over the counted terms
  int64_t correct = 0, count = 0;
  double aux_loss_sum = 0;
  int64_t aux_correct = 0, aux_count = 0;
  void add(const StepStats& o) {
    loss_sum += o.loss_sum, correct += o.correct, count += o.count;
    aux_loss_sum += o.aux_loss_sum, aux_correct += o.aux_correct, aux_count += o.aux_count;
  }
  double mean_loss() const { return count ? loss_sum / double(count) : 0.0; }
  double accuracy() const { return count ? double(correct) / double(count) : 0.0; }
};

// The parameters the loop updates: a model's flat weights and gradients and their table.
struct Trainable {
  float* weights = nullptr;
  float* grads = nullptr;
  int64_t size = 0;
  const std::vector<ParamInfo>* params = nullptr;
};

// What a training command gives the loop.
class Task {
 public:
  virtual ~Task() = default;
  virtual Trainable trainable() = 0;
  // Training items in an epoch (before --train-limit), and what one is called ("image").
  virtual int64_t items() const = 0;
  virtual const char* unit() const = 0;
  // Plans the model's buffers for micro-batches of up to B items.
  virtual void plan(int B) = 0;
  // The opening line's description: "12,345 params, 3.5 MFLOP/image, 60,000 train / ...".
  virtual std::string describe(int64_t train_items) const = 0;
  // What the opening line ends with, after the precision: ", drop path 0.1" (empty: nothing).
  virtual std::string notes() const { return ""; }
  // The second objective's name, whose epoch figures the metrics row gets as train_NAME_loss and
  // train_NAME_acc (StepStats' aux sums), or nullptr: none.
  virtual const char* aux_name() const { return nullptr; }
  // Floating-point operations of one item's forward and backward (0: not counted).
  virtual double flops_per_item() const { return 0; }
  virtual void begin_epoch(int /*epoch*/) {}
  // Forward and backward on the items items[0..B) (indices into the training set), item b
  // drawing from Rng(keys[b]), the micro-batch's shared draws from rng. Adds into the
  // gradients, scaled by grad_scale (the loss that is differentiated is grad_scale times the
  // micro-batch's mean). Returns the micro-batch's sums.
  virtual StepStats step(const int* items, const uint64_t* keys, int B, Rng& rng, float grad_scale) = 0;
  // Hands the model backward's report of finished gradients (ParamModel::set_grads_ready).
  virtual void set_grads_ready(std::function<void(int64_t from)> ready) = 0;
  // After each optimizer update (the moving average of the weights, when kept).
  virtual void after_update() {}
  // The figures of an epoch's evaluation, merged into its metrics row. Every rank calls it; they
  // share the batches (dist::BatchShares) and each gets the figures of one process.
  virtual nlohmann::json evaluate(dist::Communicator& comm) = 0;
  // Prints an epoch's line on stderr from its metrics row.
  virtual void report(const nlohmann::json& row, int epochs) const = 0;
  // The checkpoints an epoch saves, each with `marks` (epoch, step, training summary) in its
  // metadata.
  virtual std::vector<EpochFile> checkpoints(const std::map<std::string, std::string>& marks) = 0;
};

// Where a run starts: a fresh run at epoch 0, or a resumed run at its last saved epoch, with
// its metrics rows and its saved state (whose moments the loop restores).
struct ResumePoint {
  int epoch = 0;
  int64_t step = 0;
  std::vector<nlohmann::json> metrics;
  const RunState* state = nullptr;  // set when resuming
};

// The gradients of one step, on the items items[0..B) with their keys (item_key), split into K
// micro-batches of B/K, each weighted 1/K, each drawing its shared randomness (Mixup/CutMix, drop
// path) from its first item's key; what run_loop does before clipping and AdamW.
//
// Data-parallel: of the K micro-batches (K a multiple of the communicator's ranks), rank r runs
// the r-th run of K/ranks, and the gradients are summed over the ranks in rank order
// (dist/communicator.h). With one micro-batch a rank, the sum runs in chunks of chunk_elems
// gradients while backward goes on (each chunk as soon as backward has finished it; 0: one sum
// after backward). With several, a rank adds its own first and the sum follows.
//
// Exactness. With more than one micro-batch in all, each micro-batch's gradients are computed into
// zeros and added into an accumulator that starts at zero, in micro-batch order; the ranks' sum
// adds in the same order. So N ranks with one micro-batch each give the bits of one process with
// K = N, whatever the chunks. With several micro-batches a rank the order is the ranks' partial
// sums', so N ranks x K/N equal one process x K up to summation order only.
class StepGradients {
 public:
  static constexpr int64_t kChunkElems = int64_t(1) << 18;  // 1 MB of float gradients

  StepGradients(Task& task, int B, int K, dist::Communicator& comm = dist::world(), int64_t chunk_elems = kChunkElems);
  // Zeroes the gradients and computes the step's into them. Returns the step's sums over every
  // rank; loss gets the micro-batches' mean losses weighted 1/K, summed over the ranks.
  StepStats run(const int* items, const uint64_t* keys, double* loss = nullptr);

 private:
  StepStats micro_batch(int k, const int* items, const uint64_t* keys, double& mean);

  Task& task_;
  const Trainable p_;
  dist::Communicator& comm_;
  const int K_, micro_, mine_;  // mine_: micro-batches on this rank
  const int64_t chunk_elems_;
  std::vector<float> sum_;  // the accumulator, with more than one micro-batch in all
};

// Called at the end of every training step, with the steps done so far in the run, on the thread
// that runs the loop (nullptr: none). For tests and tools that watch a step from outside: what
// happens between two calls is one whole step, progress line included.
using StepObserver = void (*)(int64_t steps_done);
void set_step_observer(StepObserver observer);

// Trains `task` from `start` to options.epochs in `folder`, committing every epoch; AdamW's
// learning rate per parameter is lr times lr_scale's entry (empty: all 1). `options_json` is what
// train_state records. Stops between two steps with gmlp::Interrupted on SIGINT or SIGTERM.
TrainResult run_loop(Task& task, const RunOptions& options, const nlohmann::json& options_json, RunDir& folder,
                     const RunFiles& files, ResumePoint start, const std::vector<double>& lr_scale = {});

}  // namespace gmlp
