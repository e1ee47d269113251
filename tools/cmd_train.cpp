// gmlp train: trains a gMLP on Fashion-MNIST from a preset, or resumes a run.
#include <cstdio>

#include "commands.h"
#include "core/error.h"
#include "core/threads.h"
#include "train/trainer.h"

namespace gmlp::cli {

void add_threads_option(CLI::App& sub, int& threads) {
  sub.add_option("--threads", threads, "Threads for matrix products and loops (0: all cores)")
      ->capture_default_str();
}

void add_train(CLI::App& app) {
  struct Args {
    std::string preset = "fmnist-s", resume;
    TrainOptions opt;
    int threads = 0;
    float drop_path = -1;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("train", "Train a gMLP image classifier on Fashion-MNIST");
  TrainOptions& o = args->opt;
  sub->add_option("--preset", args->preset, "Model preset (see `gmlp info --list`)")->capture_default_str();
  auto* epochs = sub->add_option("--epochs", o.epochs, "Epochs (default: the preset's)");
  auto* batch = sub->add_option("--batch-size", o.batch_size, "Images per step (default: the preset's)");
  auto* lr = sub->add_option("--lr", o.lr, "Peak learning rate (default: the preset's)");
  auto* wd = sub->add_option("--weight-decay", o.weight_decay, "AdamW decoupled weight decay (default: the preset's)");
  sub->add_option("--min-lr", o.min_lr, "Learning rate at the end of the cosine decay")->capture_default_str();
  sub->add_option("--warmup-epochs", o.warmup_epochs, "Linear warmup length in epochs")->capture_default_str();
  sub->add_option("--clip-norm", o.clip_norm, "Global gradient-norm cap (0: off)")->capture_default_str();
  sub->add_option("--label-smoothing", o.label_smoothing, "Label smoothing")->capture_default_str();
  sub->add_option("--crop-padding", o.crop_padding, "Random-crop padding in pixels (0: off)")->capture_default_str();
  sub->add_flag("!--no-hflip", o.hflip, "Disable random horizontal flips");
  sub->add_option("--drop-path", args->drop_path, "Stochastic-depth rate of the last block (default: the preset's)");
  sub->add_option("--seed", o.seed, "Seed of initialisation, order, augmentation")->capture_default_str();
  sub->add_option("--train-limit", o.train_limit, "Train on the first N images only (0: all)")->capture_default_str();
  sub->add_option("--data-dir", o.data_dir, "Folder with the Fashion-MNIST IDX files (default: /usr/share/datasets/fashion-mnist)");
  sub->add_option("--precision", o.precision, "Matrix products: f32, or bf16 (fp32 accumulation and master weights)")
      ->check(CLI::IsMember({"f32", "bf16"}))->capture_default_str();
  sub->add_option("--out", o.out_dir, "Run folder: checkpoint.safetensors, train_state.safetensors, metrics.jsonl")->capture_default_str();
  sub->add_option("--resume", args->resume, "Continue the run in this folder from its last checkpoint (--epochs may extend it)");
  add_threads_option(*sub, args->threads);
  sub->callback([args, sub, epochs, batch, lr, wd] {
    set_threads(args->threads);
    TrainOptions opt = args->opt;
    if (!args->resume.empty()) {
      opt.out_dir = args->resume;
      if (!epochs->count()) opt.epochs = 0;  // keep the run's own
      const TrainResult r = train(ModelConfig{}, opt, true);
      std::printf("test accuracy %.2f%% (best %.2f%%) after %d more epochs in %.0f s\n",
                  100 * r.final_test_acc, 100 * r.best_test_acc, r.epochs_run, r.seconds);
      return;
    }
    const Preset& p = find_preset(args->preset);
    ModelConfig cfg = p.config;
    if (args->drop_path >= 0) cfg.drop_path = args->drop_path;
    if (!epochs->count()) opt.epochs = p.train.epochs;
    if (!batch->count()) opt.batch_size = p.train.batch_size;
    if (!lr->count()) opt.lr = p.train.lr;
    if (!wd->count()) opt.weight_decay = p.train.weight_decay;
    if (opt.epochs <= 0) fail("invalid --epochs ", opt.epochs, ": must be positive");
    const TrainResult r = train(cfg, opt, false);
    std::printf("test accuracy %.2f%% (best %.2f%%) after %d epochs in %.0f s; run in %s\n",
                100 * r.final_test_acc, 100 * r.best_test_acc, r.epochs_run, r.seconds,
                opt.out_dir.c_str());
  });
}

}  // namespace gmlp::cli
