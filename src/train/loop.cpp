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

// FNV-1a over the bytes: the same weights on every rank.
uint64_t fingerprint(const float* data, int64_t n) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (int64_t i = 0; i < n * int64_t(sizeof(float)); ++i) h = (h ^ bytes[i]) * 0x100000001b3ull;
  return h;
}

// Every rank must run the same job: the same options, data, model and starting weights. Each
// compares its own with rank 0's and a rank that differs fails, naming itself and the first
// difference (its error ends the job, dist::Communicator::abort).
void check_same_job(dist::Communicator& comm, const nlohmann::json& options, const std::string& task,
                    const Trainable& p) {
  const nlohmann::json mine = {{"options", options},
                               {"data and model", task},
                               {"parameters", p.size},
                               {"starting weights", cat(std::hex, fingerprint(p.weights, p.size))}};
  std::string theirs = mine.dump();
  comm.broadcast(theirs, 0);
  const nlohmann::json root = nlohmann::json::parse(theirs);
  for (auto it = mine.begin(); it != mine.end(); ++it) {
    if (root[it.key()] == *it) continue;
    std::string what = it.key(), a = it->dump(), b = root[it.key()].dump();
    if (it->is_object())
      for (auto o = it->begin(); o != it->end(); ++o)
        if (root[it.key()].value(o.key(), nlohmann::json()) != *o) {
          what = "option " + o.key(), a = o->dump(), b = root[it.key()].value(o.key(), nlohmann::json()).dump();
          break;
        }
    fail("this rank runs another job than rank 0: its ", what, " is ", a, ", rank 0's ", b,
         " (every rank must be started with the same options and data)");
  }
  comm.barrier();
}

}  // namespace

uint64_t item_key(uint64_t seed, int epoch, int64_t position) {
  return mix64(epoch_seed(seed, epoch) + 0x9E3779B97F4A7C15ull * uint64_t(position + 1));
}

namespace {
std::atomic<StepObserver> g_step_observer{nullptr};
}  // namespace

void set_step_observer(StepObserver observer) { g_step_observer.store(observer); }

StepGradients::StepGradients(Task& task, int B, int K, dist::Communicator& comm, int64_t chunk_elems)
    : task_(task),
      p_(task.trainable()),
      comm_(comm),
      K_(K),
      micro_(B / K),
      mine_(K / comm.size()),
      chunk_elems_(chunk_elems) {
  GMLP_CHECK(K > 0 && B % K == 0 && K % comm.size() == 0);
  if (mine_ > 1) sum_.resize(size_t(p_.size));
}

StepStats StepGradients::micro_batch(int k, const int* items, const uint64_t* keys, double& mean) {
  const size_t at = size_t(k) * size_t(micro_);
  Rng shared(keys[at] ^ 0x5DEECE66Dull);
  const StepStats r = task_.step(items + at, keys + at, micro_, shared, 1.0f / float(K_));
  mean += r.mean_loss() / K_;
  return r;
}

StepStats StepGradients::run(const int* items, const uint64_t* keys, double* loss) {
  const int ranks = comm_.size(), first = comm_.rank() * mine_;
  StepStats stats;
  double mean = 0;  // the micro-batches' mean losses, weighted 1/K as their gradients
  if (sum_.empty()) {
    // Backward writes the step's gradients (K = 1), or this rank's, summed over the ranks as
    // backward finishes them.
    std::fill_n(p_.grads, p_.size, 0.f);
    if (ranks == 1) {
      stats = micro_batch(first, items, keys, mean);
    } else {
      dist::ChunkedSum sum(comm_, p_.grads, p_.size, chunk_elems_);
      task_.set_grads_ready([&sum](int64_t from) { sum.ready_from(from); });
      try {
        stats = micro_batch(first, items, keys, mean);
      } catch (...) {
        task_.set_grads_ready(nullptr);
        throw;
      }
      task_.set_grads_ready(nullptr);
      sum.finish();
    }
  } else {
    // Each micro-batch into zeros, then added into the accumulator in order.
    std::fill(sum_.begin(), sum_.end(), 0.f);
    for (int k = first; k < first + mine_; ++k) {
      std::fill_n(p_.grads, p_.size, 0.f);
      stats.add(micro_batch(k, items, keys, mean));
      float* acc = sum_.data();
      const float* g = p_.grads;
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < p_.size; ++i) acc[i] += g[i];
    }
    std::copy(sum_.begin(), sum_.end(), p_.grads);
    if (ranks > 1) comm_.sum(p_.grads, p_.size);
  }
  if (ranks > 1) {
    double sums[7] = {stats.loss_sum,     double(stats.correct),     double(stats.count),    mean,
                      stats.aux_loss_sum, double(stats.aux_correct), double(stats.aux_count)};
    comm_.sum(sums, 7);
    stats.loss_sum = sums[0], stats.correct = int64_t(sums[1]), stats.count = int64_t(sums[2]), mean = sums[3];
    stats.aux_loss_sum = sums[4], stats.aux_correct = int64_t(sums[5]), stats.aux_count = int64_t(sums[6]);
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
  dist::Communicator& comm = dist::world();
  const int ranks = comm.size();
  if (K % ranks != 0)
    fail(!start.state ? cat("invalid --grad-accum ", K, ": expected a multiple of the ", ranks, " ranks")
                      : cat("failed to resume on ", ranks, " ranks: the run's steps have ", K,
                            K == 1 ? " micro-batch" : " micro-batches", ", which ", ranks,
                            " ranks cannot share; start it with a number of ranks that divides ", K),
         " (every rank runs as many micro-batches of a step)");
  const int micro = B / K;
  const int64_t steps_per_epoch = n / B, total_steps = steps_per_epoch * opt.epochs;  // a last partial batch is dropped
  const int64_t warmup_steps = int64_t(opt.warmup_epochs * double(steps_per_epoch));

  task.plan(micro);
  const Trainable p = task.trainable();
  if (ranks > 1) check_same_job(comm, options_json, task.describe(n), p);
  AdamWConfig acfg;
  acfg.weight_decay = opt.weight_decay;
  AdamW<float> adamw(*p.params, acfg, lr_scale);
  if (start.state) restore_moments(files, *start.state, adamw);

  const std::string accum = K > 1 ? cat(" (", K, " micro-batches of ", micro, ")") : std::string();
  const std::string job = ranks > 1 ? cat(", ", comm.describe()) : std::string();
  std::fprintf(stderr, "gmlp: %s %s, batch %d%s%s, %ld steps/epoch, %s%s\n", start.state ? "resuming" : "training",
               task.describe(n).c_str(), B, accum.c_str(), job.c_str(), long(steps_per_epoch),
               precision_name(precision), task.notes().c_str());
  Progress progress(total_steps, std::max<int64_t>(1, steps_per_epoch / 10));
  progress.set_offset(start.step);
  TrainResult result;
  std::vector<nlohmann::json>& metrics = start.metrics;
  for (const auto& m : metrics) result.best_test_acc = std::max(result.best_test_acc, m.value("test_acc", 0.0));

  std::vector<int> order(static_cast<size_t>(n));
  std::vector<uint64_t> keys(static_cast<size_t>(B));
  StepGradients gradients(task, B, K, comm, opt.bucket_mb > 0 ? int64_t(opt.bucket_mb * (1 << 20) / sizeof(float)) : 0);
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
      const StepStats stats = gradients.run(order.data() + first, keys.data(), &loss);
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
    nlohmann::json m = task.evaluate(comm);
    m["epoch"] = epoch + 1;
    m["step"] = step;
    m["train_loss"] = total.mean_loss();
    m["train_acc"] = total.accuracy();
    if (const char* aux = task.aux_name()) {
      m[cat("train_", aux, "_loss")] = total.aux_count ? total.aux_loss_sum / double(total.aux_count) : 0.0;
      m[cat("train_", aux, "_acc")] = total.aux_count ? double(total.aux_correct) / double(total.aux_count) : 0.0;
    }
    m["lr"] = lr;
    m[std::string(task.unit()) + "s_per_s"] = train_seconds > 0 ? double(steps_per_epoch * B) / train_seconds : 0.0;
    if (flops_per_step > 0)
      m["gflops_per_s"] = train_seconds > 0 ? flops_per_step * double(steps_per_epoch) / train_seconds / 1e9 : 0.0;
    m["seconds"] = seconds_since(t_epoch);
    metrics.push_back(m);
    if (comm.rank() == 0) task.report(m, opt.epochs);
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
