#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "core/error.h"
#include "core/matmul.h"
#include "data/erase.h"
#include "data/image_folder.h"
#include "data/mix.h"
#include "data/transform.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "ops/cross_entropy.h"
#include "ops/soft_cross_entropy.h"
#include "train/checkpoint.h"
#include "train/eval_subset.h"
#include "train/evaluate.h"
#include "train/guards.h"
#include "train/optimizer.h"
#include "train/progress.h"
#include "train/run_dir.h"
#include "train/run_files.h"

namespace gmlp {

namespace fs = std::filesystem;

// Everything but out_dir, which names where a run is, not what it is.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(TrainOptions, data_dir, epochs, batch_size, lr,
                                                min_lr, warmup_epochs, weight_decay, clip_norm,
                                                label_smoothing, crop_padding, hflip,
                                                mixup_alpha, cutmix_alpha, mix_prob, switch_prob,
                                                erase_prob, ema_decay, seed, train_limit,
                                                eval_limit, preset, precision)

nlohmann::json TrainOptions::to_json() const { return *this; }

TrainOptions TrainOptions::from_json(const nlohmann::json& j) { return j.get<TrainOptions>(); }

namespace {

void save_run(RunDir& run, const Model<float>& model, const Model<float>* ema,
              AdamW<float>& opt, const data::Normalization& norm,
              const std::vector<std::string>& classes, const TrainOptions& options, int epoch,
              int64_t step, const std::vector<nlohmann::json>& metrics) {
  const std::map<std::string, std::string> marks = {{"epoch", std::to_string(epoch)},
                                                    {"step", std::to_string(step)},
                                                    {"training", training_summary(options.to_json(), metrics)}};
  std::vector<EpochFile> checkpoints = {{RunFiles::kCheckpoint, [&](const std::string& path) {
                                           save_checkpoint(path, model, norm, classes, marks);
                                         }}};
  if (ema)
    checkpoints.push_back({RunFiles::kEma, [&](const std::string& path) { save_checkpoint(path, *ema, norm, classes, marks); }});
  save_epoch(run, opt, RunState{epoch, step, opt.steps(), options.to_json(), {}, {}}, metrics, std::move(checkpoints));
}

// A checkpoint of the run in `files` that must be from the state's epoch.
Checkpoint load_at_epoch(const RunFiles& files, const std::string& path, int epoch) {
  Checkpoint ck = load_checkpoint(path);
  if (ck.metadata["epoch"] != std::to_string(epoch))
    fail("failed to resume: '", path, "' is from epoch ", ck.metadata["epoch"], " but '",
         files.state, "' from epoch ", epoch,
         " (the folder was changed by hand; start again with --overwrite)");
  return ck;
}

}  // namespace

TrainResult train(const ModelConfig& config_in, const TrainOptions& options_in, bool resume, bool overwrite) {
  const auto t_start = std::chrono::steady_clock::now();
  TrainOptions opt = options_in;
  if (!resume) validate_options(opt);  // before the run folder exists; a resumed run's, once read
  RunDir run(opt.out_dir, "train", resume ? RunStart::resume : overwrite ? RunStart::overwrite : RunStart::fresh);
  const RunFiles files(opt.out_dir);

  std::unique_ptr<Model<float>> model, ema;  // ema: the weights' moving average, when kept
  data::Normalization norm;
  int start_epoch = 0;
  int64_t step = 0;
  std::vector<nlohmann::json> metrics;
  RunState state;
  if (resume) {
    state = read_run_state(files, &metrics);
    if (state.options.contains("vocab_size"))  // LmOptions: a text run
      fail("'", opt.out_dir, "' is a text run, not an image classifier's: resume it with gmlp ",
           state.options.value("task", "").empty() ? "pretrain" : "finetune", " --resume");
    const int epochs_wanted = opt.epochs;
    try {
      opt = TrainOptions::from_json(state.options);
    } catch (const nlohmann::json::exception&) {
      fail("failed to resume from '", files.state, "': metadata 'options' is malformed");
    }
    start_epoch = state.epoch;
    step = state.step;
    opt.out_dir = options_in.out_dir;
    if (epochs_wanted > 0) opt.epochs = epochs_wanted;
    validate_options(opt);
    Checkpoint ck = load_at_epoch(files, files.checkpoint, start_epoch);
    model = std::move(ck.model);
    norm = ck.norm;
    if (opt.ema_decay > 0) {
      if (!fs::exists(files.ema))
        fail("failed to resume: the run keeps a moving average (--ema ", opt.ema_decay, ") but '",
             files.ema, "' does not exist");
      ema = std::move(load_at_epoch(files, files.ema, start_epoch).model);
    }
  }
  // The data in the model's input format: a resumed run's, or the one about to be made.
  const ModelConfig& input_cfg = model ? model->config() : config_in;
  const std::string data_dir = opt.data_dir.empty() ? data::kFashionMnistDir : opt.data_dir;
  data::ImageSet train_set = data::load_images(data_dir, "train", input_cfg.in_chans, input_cfg.img_size);
  const data::ImageSet test_set = data::load_images(data_dir, "test", input_cfg.in_chans, input_cfg.img_size);
  if (!model) {
    ModelConfig config = config_in;
    config.num_classes = train_set.classes;  // one output per class of the training data
    model = make_model<float>(config);
    Rng init_rng(opt.seed);
    model->init(init_rng);
    norm = data::Normalization::gmlp_default(config.in_chans);
    if (opt.ema_decay > 0) {  // the average starts at the initial weights, as timm's
      ema = make_model<float>(config);
      std::copy_n(model->weights(), model->num_params(), ema->weights());
    }
  }
  const ModelConfig& cfg = model->config();
  const Precision precision = use_precision(opt.precision);
  check_compatible(cfg, train_set, data_dir);
  const int n_train = opt.train_limit > 0 ? std::min(opt.train_limit, train_set.count) : train_set.count;
  const int B = std::min(opt.batch_size, n_train);
  if (B <= 0) fail("invalid batch size ", opt.batch_size, ": must be positive");
  const int64_t steps_per_epoch = n_train / B;  // the last partial batch is dropped
  const int64_t total_steps = steps_per_epoch * opt.epochs;
  const int64_t warmup_steps = int64_t(opt.warmup_epochs * double(steps_per_epoch));

  model->plan(B);
  if (ema) ema->plan(B, Mode::infer);
  AdamWConfig acfg;
  acfg.weight_decay = opt.weight_decay;
  AdamW<float> adamw(model->params(), acfg);
  if (resume) restore_moments(files, state, adamw);

  const int64_t K = cfg.num_classes, C = cfg.in_chans, S = cfg.img_size, image_size = C * S * S;
  std::vector<float> input(int64_t(B) * image_size), probs(int64_t(B) * K), dlogits(int64_t(B) * K),
      targets(int64_t(B) * K);
  std::vector<int32_t> labels(B);
  std::vector<uint64_t> image_seeds(B);
  std::vector<int> order(n_train);
  const data::Augment aug{opt.crop_padding, opt.hflip};
  const data::EraseConfig erase{float(opt.erase_prob)};
  data::MixConfig mix;
  mix.mixup_alpha = float(opt.mixup_alpha), mix.cutmix_alpha = float(opt.cutmix_alpha);
  mix.prob = float(opt.mix_prob), mix.switch_prob = float(opt.switch_prob);
  mix.smoothing = float(opt.label_smoothing);
  auto unit = [](double p) { return p >= 0 && p <= 1; };
  if (!(opt.mixup_alpha >= 0 && opt.cutmix_alpha >= 0))
    fail("invalid --mixup/--cutmix: alphas must be >= 0 (got ", opt.mixup_alpha, ", ", opt.cutmix_alpha, ")");
  if (!unit(opt.mix_prob) || !unit(opt.switch_prob) || !unit(opt.erase_prob))
    fail("invalid --mix-prob ", opt.mix_prob, ", --switch-prob ", opt.switch_prob,
         " or --random-erase ", opt.erase_prob, ": each must be in [0, 1]");
  const double flops_per_step = 3.0 * model->flops_per_image() * B;  // forward + 2× backward

  // The test images every epoch evaluates: all, or --eval-limit of them drawn by the seed.
  const std::vector<int64_t> test_items = eval_subset(test_set.count, opt.eval_limit, opt.seed);
  const int64_t n_test = int64_t(test_items.size());
  const std::string subset = subset_label(n_test, test_set.count);
  const std::string whole = eval_limit_note(opt.eval_limit, test_set.count, "test images");
  if (!whole.empty()) std::fprintf(stderr, "gmlp: %s\n", whole.c_str());
  std::fprintf(stderr, "gmlp: %s %d params, %.1f MFLOP/image, %s train / %s test images, batch %d, %ld steps/epoch, %s\n",
               resume ? "resuming" : "training", int(model->num_params()),
               model->flops_per_image() / 1e6, thousands(n_train).c_str(),
               (subset.empty() ? thousands(n_test) : subset).c_str(), B, long(steps_per_epoch),
               precision_name(precision));
  Progress progress(total_steps, std::max<int64_t>(1, steps_per_epoch / 10));
  progress.set_offset(step);
  TrainResult result;
  for (const auto& m : metrics) result.best_test_acc = std::max(result.best_test_acc, m.value("test_acc", 0.0));

  DivergenceGuard diverged(opt.lr);
  for (int epoch = start_epoch; epoch < opt.epochs; ++epoch) {
    run.check_stop(opt.epochs);
    const auto t_epoch = std::chrono::steady_clock::now();
    Rng rng(epoch_seed(opt.seed, epoch));
    std::iota(order.begin(), order.end(), 0);
    rng.shuffle(order);
    double loss_sum = 0, train_seconds = 0;
    int64_t correct = 0, seen = 0;
    double lr = 0;
    for (int64_t s = 0; s < steps_per_epoch; ++s, ++step) {
      const auto t_step = std::chrono::steady_clock::now();
      for (int i = 0; i < B; ++i) {
        image_seeds[i] = rng.next();
        labels[i] = train_set.labels[order[s * B + i]];
      }
#pragma omp parallel for schedule(static)
      for (int i = 0; i < B; ++i) {
        Rng image_rng(image_seeds[i]);
        float* image = input.data() + i * image_size;
        data::augment_image(image, train_set.pixels.data() + int64_t(order[s * B + i]) * image_size,
                            int(C), int(S), norm, aug, image_rng);
        if (erase.enabled()) data::random_erase(image, int(C), int(S), erase, image_rng);
      }
      // Mixup/CutMix train on soft targets; without them, on the labels (same numbers as soft
      // targets of smoothed one-hots, one pass fewer).
      if (mix.enabled())
        data::mix_batch(input.data(), B, int(C), int(S), targets.data(), labels.data(), int(K), mix, rng);
      const float* logits = model->forward(input.data(), B, &rng);
      const float loss =
          mix.enabled()
              ? soft_cross_entropy_forward(probs.data(), logits, targets.data(), B, K)
              : cross_entropy_forward(probs.data(), logits, labels.data(), B, K, float(opt.label_smoothing));
      diverged.check(loss, step);
      for (int i = 0; i < B; ++i) {
        const float* row = logits + i * K;
        correct += (std::max_element(row, row + K) - row) == labels[i];
      }
      if (mix.enabled())
        soft_cross_entropy_backward(dlogits.data(), probs.data(), targets.data(), B, K);
      else
        cross_entropy_backward(dlogits.data(), probs.data(), labels.data(), B, K,
                               float(opt.label_smoothing));
      model->zero_grad();
      model->backward(dlogits.data());
      clip_grad_norm(model->grads(), model->num_params(), opt.clip_norm);
      lr = lr_schedule(step, total_steps, warmup_steps, opt.lr, opt.min_lr);
      adamw.step(model->weights(), model->grads(), lr);
      if (ema) ema_update(ema->weights(), model->weights(), model->num_params(), opt.ema_decay);
      loss_sum += double(loss) * B;
      seen += B;
      train_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_step).count();
      char line[256];
      std::snprintf(line, sizeof line,
                    "epoch %d/%d  step %ld/%ld  loss %.4f  acc %.2f%%  lr %.2e  %.0f img/s  %.1f GFLOP/s",
                    epoch + 1, opt.epochs, long(s + 1), long(steps_per_epoch), loss_sum / seen,
                    100.0 * double(correct) / double(seen), lr, double(seen) / train_seconds,
                    flops_per_step * double(s + 1) / train_seconds / 1e9);
      progress.update(step + 1, line);
      run.check_stop(opt.epochs);
    }
    progress.finish();
    const EvalResult ev = evaluate(*model, test_set, norm, {.items = &test_items, .progress = "test"});
    const EvalResult ev_ema =
        ema ? evaluate(*ema, test_set, norm, {.items = &test_items, .progress = "test, moving average"}) : EvalResult{};
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_epoch).count();
    nlohmann::json m = {{"epoch", epoch + 1},
                        {"step", step},
                        {"train_loss", seen ? loss_sum / seen : 0.0},
                        {"train_acc", seen ? double(correct) / double(seen) : 0.0},
                        {"test_loss", ev.loss},
                        {"test_acc", ev.accuracy},
                        {"test_count", ev.count},
                        {"test_total", ev.total},
                        {"lr", lr},
                        {"images_per_s", train_seconds > 0 ? double(seen) / train_seconds : 0.0},
                        {"gflops_per_s", train_seconds > 0 ? flops_per_step * double(steps_per_epoch) / train_seconds / 1e9 : 0.0},
                        {"seconds", seconds},
                        {"eval_seconds", ev.seconds + ev_ema.seconds}};
    std::string ema_line;
    if (ema) {
      m["test_loss_ema"] = ev_ema.loss;
      m["test_acc_ema"] = ev_ema.accuracy;
      char buf[64];
      std::snprintf(buf, sizeof buf, "  ema acc %.2f%%", 100 * ev_ema.accuracy);
      ema_line = buf;
    }
    metrics.push_back(m);
    result.best_test_acc = std::max(result.best_test_acc, ev.accuracy);
    result.final_test_acc = ev.accuracy;
    std::fprintf(stderr, "epoch %d/%d  train loss %.4f acc %.2f%%  test%s loss %.4f acc %.2f%%%s  (%.0f img/s, %s)\n",
                 epoch + 1, opt.epochs, m["train_loss"].get<double>(), 100 * m["train_acc"].get<double>(),
                 subset.empty() ? "" : (" (" + subset + ")").c_str(), ev.loss, 100 * ev.accuracy,
                 ema_line.c_str(), m["images_per_s"].get<double>(), format_duration(seconds).c_str());
    save_run(run, *model, ema.get(), adamw, norm, train_set.class_names, opt, epoch + 1, step, metrics);
    ++result.epochs_run;
  }
  if (!metrics.empty()) {
    result.final_test_acc = metrics.back().value("test_acc", 0.0);
    result.final_test_acc_ema = metrics.back().value("test_acc_ema", -1.0);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  return result;
}

bool holds_same_run(const ModelConfig& config, const TrainOptions& options) {
  const RunDir run(options.out_dir, "train", RunStart::inspect);
  if (run.epoch() == 0) return false;
  const RunFiles files(options.out_dir);
  // Every field the run was started with must match; its epochs may grow, its classes are the data's.
  const auto shown = [](const nlohmann::json& v) { return v.is_number_float() ? cat(v.get<double>()) : v.dump(); };
  const auto same = [&](nlohmann::json held, nlohmann::json wanted, const char* drop) {
    held.erase(drop), wanted.erase(drop);
    for (auto it = wanted.begin(); it != wanted.end(); ++it)
      if (!held.contains(it.key()) || held[it.key()] != *it)
        fail("'", options.out_dir, "' holds a run of ", run.epoch(), run.epoch() == 1 ? " epoch" : " epochs",
             " with ", it.key(), " ", shown(held.value(it.key(), nlohmann::json())), ", not ", shown(*it),
             ": give compare that run's options to continue it, or --overwrite to train it again");
  };
  same(read_run_state(files, nullptr).options, options.to_json(), "epochs");
  const st::File checkpoint = st::File::open(files.checkpoint);
  const auto config_meta = checkpoint.metadata().find("config");
  nlohmann::json held_config;
  if (config_meta != checkpoint.metadata().end())
    held_config = nlohmann::json::parse(config_meta->second, nullptr, false);
  same(held_config.is_object() ? held_config : nlohmann::json::object(), config.to_json(), "num_classes");
  return true;
}

}  // namespace gmlp
