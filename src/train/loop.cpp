#include "train/loop.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <numeric>

#include "core/error.h"
#include "core/matmul.h"
#include "train/guards.h"
#include "train/optimizer.h"
#include "train/progress.h"

namespace gmlp {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// splitmix64's finaliser: consecutive positions get unrelated keys.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t item_key(uint64_t seed, int epoch, int64_t position) {
  return mix64(epoch_seed(seed, epoch) + 0x9E3779B97F4A7C15ull * uint64_t(position + 1));
}

namespace {
std::atomic<StepObserver> g_step_observer{nullptr};
}  // namespace

void set_step_observer(StepObserver observer) { g_step_observer.store(observer); }

StepStats step_gradients(Task& task, const Trainable& p, const int* items, const uint64_t* keys, int B, int K,
                         double* loss) {
  std::fill_n(p.grads, p.size, 0.f);
  const int micro = B / K;
  const float grad_scale = 1.0f / float(K);
  StepStats stats;
  double mean = 0;  // the micro-batches' mean losses, weighted 1/K as their gradients
  for (int k = 0; k < K; ++k) {
    const size_t at = size_t(k) * size_t(micro);
    Rng shared(keys[at] ^ 0x5DEECE66Dull);
    const StepStats r = task.step(items + at, keys + at, micro, shared, grad_scale);
    stats.add(r);
    mean += r.mean_loss() / K;
  }
  if (loss) *loss = mean;
  return stats;
}

TrainResult run_loop(Task& task, const RunOptions& opt, const nlohmann::json& options_json, RunDir& folder,
                     const RunFiles& files, ResumePoint start, const std::vector<double>& lr_scale) {
  const auto t_start = std::chrono::steady_clock::now();
  const Precision precision = use_precision(opt.precision);
  const int64_t n = opt.train_limit > 0 ? std::min<int64_t>(opt.train_limit, task.items()) : task.items();
  // A batch larger than the data is the data: one step an epoch.
  const int B = int(std::min<int64_t>(opt.batch_size, n));
  if (B <= 0) fail("failed to train: no training ", task.unit(), "s");
  const int K = opt.grad_accum;
  if (B % K != 0)
    fail("invalid --grad-accum ", K, ": expected a divisor of the batch, ", B,
         B < opt.batch_size ? cat(" (--batch-size ", opt.batch_size, " cut to the ", n, " training ", task.unit(), "s)")
                            : std::string(),
         ", so that every micro-batch has as many ", task.unit(), "s");
  const int micro = B / K;
  const int64_t steps_per_epoch = n / B, total_steps = steps_per_epoch * opt.epochs;  // a last partial batch is dropped
  const int64_t warmup_steps = int64_t(opt.warmup_epochs * double(steps_per_epoch));

  task.plan(micro);
  const Trainable p = task.trainable();
  AdamWConfig acfg;
  acfg.weight_decay = opt.weight_decay;
  AdamW<float> adamw(*p.params, acfg, lr_scale);
  if (start.state) restore_moments(files, *start.state, adamw);

  const std::string accum = K > 1 ? cat(" (", K, " micro-batches of ", micro, ")") : std::string();
  std::fprintf(stderr, "gmlp: %s %s, batch %d%s, %ld steps/epoch, %s%s\n", start.state ? "resuming" : "training",
               task.describe(n).c_str(), B, accum.c_str(), long(steps_per_epoch), precision_name(precision),
               task.notes().c_str());
  Progress progress(total_steps, std::max<int64_t>(1, steps_per_epoch / 10));
  progress.set_offset(start.step);
  TrainResult result;
  std::vector<nlohmann::json>& metrics = start.metrics;
  for (const auto& m : metrics) result.best_test_acc = std::max(result.best_test_acc, m.value("test_acc", 0.0));

  std::vector<int> order(static_cast<size_t>(n));
  std::vector<uint64_t> keys(static_cast<size_t>(B));
  const double flops_per_step = task.flops_per_item() * B;
  int64_t step = start.step;
  DivergenceGuard diverged(opt.lr);
  for (int epoch = start.epoch; epoch < opt.epochs; ++epoch) {
    folder.check_stop(opt.epochs);
    const auto t_epoch = std::chrono::steady_clock::now();
    task.begin_epoch(epoch);
    Rng shuffle(epoch_seed(opt.seed, epoch));
    std::iota(order.begin(), order.end(), 0);
    shuffle.shuffle(order);
    StepStats total;
    double train_seconds = 0, lr = 0;
    for (int64_t s = 0; s < steps_per_epoch; ++s, ++step) {
      const auto t_step = std::chrono::steady_clock::now();
      const int64_t first = s * B;  // position of the step's first item in the epoch's order
      for (int b = 0; b < B; ++b) keys[size_t(b)] = item_key(opt.seed, epoch, first + b);
      double loss = 0;
      const StepStats stats = step_gradients(task, p, order.data() + first, keys.data(), B, K, &loss);
      diverged.check(loss, step);
      lr = lr_schedule(step, total_steps, warmup_steps, opt.lr, opt.min_lr);
      optimizer_step(adamw, p.weights, p.grads, p.size, opt.clip_norm, lr);
      task.after_update();
      total.add(stats);
      train_seconds += seconds_since(t_step);
      char line[256];
      const int used =
          std::snprintf(line, sizeof line, "epoch %d/%d  step %ld/%ld  loss %.4f  acc %.2f%%  lr %.2e  %.0f %ss/s",
                        epoch + 1, opt.epochs, long(s + 1), long(steps_per_epoch), total.mean_loss(),
                        100 * total.accuracy(), lr, double((s + 1) * B) / train_seconds, task.unit());
      if (flops_per_step > 0 && used > 0 && size_t(used) < sizeof line)
        std::snprintf(line + used, sizeof line - size_t(used), "  %.1f GFLOP/s",
                      flops_per_step * double(s + 1) / train_seconds / 1e9);
      progress.update(step + 1, line);
      folder.check_stop(opt.epochs);
      if (const StepObserver observe = g_step_observer.load()) observe(step + 1);
    }
    progress.finish();
    nlohmann::json m = task.evaluate();
    m["epoch"] = epoch + 1;
    m["step"] = step;
    m["train_loss"] = total.mean_loss();
    m["train_acc"] = total.accuracy();
    m["lr"] = lr;
    m[std::string(task.unit()) + "s_per_s"] = train_seconds > 0 ? double(steps_per_epoch * B) / train_seconds : 0.0;
    if (flops_per_step > 0)
      m["gflops_per_s"] = train_seconds > 0 ? flops_per_step * double(steps_per_epoch) / train_seconds / 1e9 : 0.0;
    m["seconds"] = seconds_since(t_epoch);
    metrics.push_back(m);
    task.report(m, opt.epochs);
    const std::map<std::string, std::string> marks = {{"epoch", std::to_string(epoch + 1)},
                                                      {"step", std::to_string(step)},
                                                      {"training", training_summary(options_json, metrics)}};
    save_epoch(folder, adamw, RunState{epoch + 1, step, adamw.steps(), options_json, {}, {}}, metrics,
               task.checkpoints(marks));
    result.final_test_acc = m.value("test_acc", 0.0);
    result.best_test_acc = std::max(result.best_test_acc, result.final_test_acc);
    ++result.epochs_run;
  }
  if (!metrics.empty()) {
    result.final_test_acc = metrics.back().value("test_acc", 0.0);
    result.final_test_acc_ema = metrics.back().value("test_acc_ema", -1.0);
  }
  result.seconds = seconds_since(t_start);
  return result;
}

}  // namespace gmlp
