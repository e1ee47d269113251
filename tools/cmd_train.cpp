// gmlp train: trains an image classifier (Fashion-MNIST, CIFAR-10 or an image folder) from a
// preset, or resumes a run.
// The training flags are shared with gmlp compare (add_train_flags / resolve_training).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "commands.h"
#include "core/error.h"
#include "core/threads.h"
#include "dist/communicator.h"
#include "train/guards.h"

namespace gmlp::cli {

namespace {
// ", moving average 93.10%" when the run keeps one (--ema), else nothing.
std::string ema_summary(const TrainResult& r) {
  if (r.final_test_acc_ema < 0) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, ", moving average %.2f%%", 100 * r.final_test_acc_ema);
  return buf;
}
}  // namespace

const Preset& image_preset(const std::string& name) {
  for (const TextPreset& p : text_presets())
    if (p.name == name)
      fail("'", name, "' is a text preset: pretrain it with gmlp pretrain --preset ", name,
           "; train, compare and bench take the image presets of gmlp info --list");
  return find_preset(name);
}

const TextPreset& text_preset(const std::string& name) {
  for (const Preset& p : presets())
    if (p.name == name)
      fail("'", name, "' is an image preset: train it with gmlp train --preset ", name,
           "; pretrain takes the text presets of gmlp info --list");
  return find_text_preset(name);
}

CLI::Option* add_eval_limit_option(CLI::App& sub, int& limit, const std::string& items, bool training,
                                   bool stratified) {
  const std::string which =
      training ? ", the same every epoch so curves compare" : ": the ones train --eval-limit N --seed S evaluated on";
  return sub
      .add_option("--eval-limit", limit,
                  "Evaluate on N " + items + " drawn at random" + (stratified ? " in each class's proportion" : "") +
                      ", fixed by --seed" + which + " (default: all; N at least the split's size: all of it)")
      ->type_name("N")
      ->check(at_least(1, "leave it out to evaluate on all"));
}

RunFlags add_run_flags(CLI::App& sub, RunOptions& o, const std::string& items, bool preset_defaults) {
  const auto shown = [&](CLI::Option* opt, const std::string& help) {
    if (preset_defaults) return opt->description(help + " (default: the preset's)");
    return opt->description(help)->capture_default_str();
  };
  RunFlags f;
  f.epochs = shown(sub.add_option("--epochs", o.epochs), "Epochs")->check(at_least(1));
  f.batch = shown(sub.add_option("--batch-size", o.batch_size), items + " per optimizer step")->check(at_least(1));
  f.accum = sub.add_option("--grad-accum", o.grad_accum,
                           "Split each step's batch into this many micro-batches, whose gradients are averaged: "
                           "the same step in less memory (a divisor of --batch-size). Under mpirun the ranks "
                           "share them, a multiple of the ranks (default: 1, under mpirun -np N: N)")
                ->type_name("K")
                ->check(at_least(1));
  sub.add_option("--bucket-mb", o.bucket_mb,
                 "Under mpirun: sum the gradients over the ranks in chunks of this many MB, each as soon as "
                 "backward has made it, so that the sums overlap backward (0: one sum after backward)")
      ->type_name("MB")
      ->check(real_in(0, INFINITY, Ends::closed))
      ->capture_default_str();
  f.lr = shown(sub.add_option("--lr", o.lr), "Peak learning rate")->check(real_in(0, INFINITY));
  f.wd = shown(sub.add_option("--weight-decay", o.weight_decay), "AdamW decoupled weight decay")
             ->check(real_in(0, INFINITY));
  sub.add_option("--min-lr", o.min_lr, "Learning rate at the end of the cosine decay")
      ->check(real_in(0, INFINITY))
      ->capture_default_str();
  sub.add_option("--warmup-epochs", o.warmup_epochs, "Linear warmup length in epochs")
      ->check(real_in(0, INFINITY))
      ->capture_default_str();
  sub.add_option("--clip-norm", o.clip_norm, "Global gradient-norm cap (0: off)")
      ->check(real_in(0, INFINITY))
      ->capture_default_str();
  sub.add_option("--precision", o.precision,
                 "Matrix products: f32, bf16 (fp32 accumulation and master weights), or auto (bf16 where the CPU "
                 "has AMX)")
      ->check(CLI::IsMember({"f32", "bf16", "auto"}))
      ->capture_default_str();
  return f;
}

void add_train_flags(CLI::App& sub, TrainFlags& f) {
  TrainOptions& o = f.opt;
  const auto closed = Ends::closed, below_one = Ends::closed_open;
  f.run = add_run_flags(sub, o, "Images", true);
  sub.add_option("--label-smoothing", o.label_smoothing, "Label smoothing (DeiT 0.1)")
      ->check(real_in(0, 1, below_one))
      ->capture_default_str();
  sub.add_option("--crop-padding", o.crop_padding, "Random-crop padding in pixels (0: off)")
      ->check(whole_in(0, 4096))
      ->capture_default_str();
  sub.add_flag_callback(
      "--no-hflip", [&o] { o.hflip = false; }, "Disable random horizontal flips");
  sub.add_option("--mixup", o.mixup_alpha, "Mixup: λ ~ Beta(α, α) (0: off; DeiT 0.8)")
      ->check(real_in(0, 1000, closed))
      ->capture_default_str();
  sub.add_option("--cutmix", o.cutmix_alpha, "CutMix: λ ~ Beta(α, α) (0: off; DeiT 1.0)")
      ->check(real_in(0, 1000, closed))
      ->capture_default_str();
  sub.add_option("--mix-prob", o.mix_prob, "Chance a batch is mixed when Mixup or CutMix is on (DeiT 1.0)")
      ->check(real_in(0, 1))
      ->capture_default_str();
  sub.add_option("--switch-prob", o.switch_prob, "Chance of CutMix rather than Mixup when both are on (DeiT 0.5)")
      ->check(real_in(0, 1))
      ->capture_default_str();
  sub.add_option("--random-erase", o.erase_prob, "Random erasing probability per image (0: off; DeiT 0.25)")
      ->check(real_in(0, 1))
      ->capture_default_str();
  sub.add_option("--ema", o.ema_decay,
                 "Keep a moving average of the weights with this decay per step, evaluated each epoch and saved as "
                 "checkpoint_ema.safetensors (0: off; DeiT 0.99996)")
      ->check(real_in(0, 1, below_one))
      ->capture_default_str();
  sub.add_option("--drop-path", f.drop_path,
                 "Stochastic depth of the last block, linear in depth from 0 (default: the preset's; DeiT-S 0.1)")
      ->check(real_in(0, 1, below_one));
  sub.add_option("--set", f.sets,
                 "Override a model config field, e.g. --set gate=additive --set dim=96 (see `gmlp info --json`)");
  sub.add_option("--seed", o.seed, "Seed of initialisation, order, augmentation and --eval-limit's draw")
      ->check(seed_value())
      ->capture_default_str();
  sub.add_option("--train-limit", o.train_limit, "Train on the first N images only (0: all)")
      ->check(at_least(0))
      ->capture_default_str();
  add_eval_limit_option(sub, o.eval_limit, "test images");
  sub.add_option("--data-dir", o.data_dir, kDataDirHelp);
}

nlohmann::json apply_sets(nlohmann::json j, const std::vector<std::string>& sets) {
  for (const std::string& s : sets) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0) fail("invalid --set '", s, "': expected key=value");
    const std::string key = s.substr(0, eq), value = s.substr(eq + 1);
    if (!j.contains(key)) {
      std::string keys;
      for (auto it = j.begin(); it != j.end(); ++it) keys += (keys.empty() ? "" : ", ") + it.key();
      fail("invalid --set '", s, "': the model config has no field '", key, "' (fields: ", keys, ")");
    }
    if (j[key].is_string()) {
      j[key] = value;
    } else if (j[key].is_boolean()) {
      if (value != "true" && value != "false")
        fail("invalid --set '", s, "': '", key, "' takes true or false (got '", value, "')");
      j[key] = value == "true";
    } else {
      nlohmann::json v = nlohmann::json::parse(value, nullptr, false);
      if (v.is_discarded() || !v.is_number())
        fail("invalid --set '", s, "': '", key, "' takes a number (got '", value, "')");
      j[key] = v;
    }
  }
  return j;
}

ModelConfig apply_sets(ModelConfig cfg, const std::vector<std::string>& sets) {
  try {
    cfg = ModelConfig::from_json(apply_sets(cfg.to_json(), sets));
  } catch (const nlohmann::json::exception& e) {
    fail("invalid --set: ", e.what());
  }
  cfg.validate();
  param_table(cfg);  // its size, before any work
  return cfg;
}

std::pair<ModelConfig, TrainOptions> resolve_training(const Preset& p, const TrainFlags& f) {
  ModelConfig cfg = p.config;
  TrainOptions opt = f.opt;
  if (f.drop_path >= 0) cfg.drop_path = f.drop_path;
  cfg = apply_sets(cfg, f.sets);
  if (!f.run.epochs->count()) opt.epochs = p.train.epochs;
  if (!f.run.batch->count()) opt.batch_size = p.train.batch_size;
  if (!f.run.lr->count()) opt.lr = p.train.lr;
  if (!f.run.wd->count()) opt.weight_decay = p.train.weight_decay;
  default_grad_accum(opt, f.run);
  // The ranges across options (--min-lr <= --lr, warmup within the run, ...) and the preset's
  // values, before any folder or file: the validators above checked each given value alone.
  validate_options(opt);
  if (opt.crop_padding >= cfg.img_size)
    fail("invalid --crop-padding ", opt.crop_padding, ": expected less than the image side, ", cfg.img_size,
         " (a larger shift leaves only padding)");
  return {cfg, opt};
}

void add_overwrite_option(CLI::App& sub, bool& overwrite, const std::string& what) {
  sub.add_flag("--overwrite", overwrite,
               "Start a new run over " + what + " (without it, a folder that holds a run is refused)");
}

void default_grad_accum(RunOptions& options, const RunFlags& flags) {
  if (flags.accum->count() == 0) options.grad_accum = dist::world().size();
}

void check_resume_flags(const CLI::App& sub, const std::vector<std::string>& honoured) {
  for (const CLI::Option* o : sub.get_options()) {
    if (o->count() == 0 || o->get_lnames().empty()) continue;
    const std::string name = "--" + o->get_lnames().front();
    if (std::find(honoured.begin(), honoured.end(), name) != honoured.end()) continue;
    std::string list;
    for (size_t i = 1; i < honoured.size(); ++i)
      list += (i == 1 ? "" : i + 1 == honoured.size() ? " and " : ", ") + honoured[i];
    throw CLI::ValidationError(name, "cannot be given with " + honoured.front() +
                                         ", which continues the run with its own options (with it, only " + list +
                                         " apply)");
  }
}

void add_train(CLI::App& app) {
  struct Args {
    std::string preset = "fmnist-s", resume;
    TrainFlags flags;
    int threads = 0;
    bool overwrite = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "train", "Train an image classifier on Fashion-MNIST, CIFAR-10 or an image folder (--data-dir), or resume a run");
  sub->add_option("--preset", args->preset, "Model preset (see `gmlp info --list`)")->capture_default_str();
  add_train_flags(*sub, args->flags);
  sub->add_option("--out", args->flags.opt.out_dir,
                  "Run folder: checkpoint.safetensors, train_state.safetensors, metrics.jsonl")
      ->capture_default_str();
  sub->add_option("--resume", args->resume,
                  "Continue the run in this folder from its last checkpoint, with the run's own options "
                  "(--epochs may extend it)");
  sub->add_option("--init", args->flags.opt.init,
                  "Start from this image checkpoint's architecture and weights (gmlp's or timm's): --set img_size=S "
                  "runs it at another size, its spatial weights resampled; a head of other classes starts afresh");
  add_fit_option(*sub, args->flags.opt.fit);
  add_overwrite_option(*sub, args->overwrite, "the run in the --out folder");
  add_threads_option(*sub, args->threads);
  sub->callback([args, sub] {
    set_threads(args->threads);
    if (!args->resume.empty()) {
      check_resume_flags(*sub, {"--resume", "--epochs", "--threads", "--bucket-mb", "--config"});
      TrainOptions opt = args->flags.opt;
      opt.out_dir = args->resume;
      if (!args->flags.run.epochs->count()) opt.epochs = 0;  // keep the run's own
      const TrainResult r = train(ModelConfig{}, opt, true);
      std::printf("test accuracy %.2f%% (best %.2f%%)%s after %d more epoch%s in %.0f s\n", 100 * r.final_test_acc,
                  100 * r.best_test_acc, ema_summary(r).c_str(), r.epochs_run, r.epochs_run == 1 ? "" : "s", r.seconds);
      return;
    }
    Preset preset = image_preset(args->preset);
    if (!args->flags.opt.init.empty()) {  // the architecture is the checkpoint's; the schedule the preset's
      preset.config = load_checkpoint(args->flags.opt.init).config;
      preset.config.drop_path = 0;  // regularisation is the run's to choose (--drop-path, --set)
    }
    auto [cfg, opt] = resolve_training(preset, args->flags);
    if (!opt.init.empty()) check_resizable(preset.config, cfg.img_size);  // before the run folder is made
    opt.preset = args->preset;
    const TrainResult r = train(cfg, opt, false, args->overwrite);
    std::printf("test accuracy %.2f%% (best %.2f%%)%s after %d epoch%s in %.0f s; run in %s\n", 100 * r.final_test_acc,
                100 * r.best_test_acc, ema_summary(r).c_str(), r.epochs_run, r.epochs_run == 1 ? "" : "s", r.seconds,
                opt.out_dir.c_str());
  });
}

}  // namespace gmlp::cli
