#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>

#include "core/error.h"
#include "core/matmul.h"
#include "data/erase.h"
#include "data/image_folder.h"
#include "data/mix.h"
#include "data/transform.h"
#include "dist/communicator.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "ops/cross_entropy.h"
#include "ops/soft_cross_entropy.h"
#include "train/checkpoint.h"
#include "train/eval_subset.h"
#include "train/evaluate.h"
#include "train/guards.h"
#include "train/image_task.h"
#include "train/loop.h"
#include "train/optimizer.h"
#include "train/progress.h"
#include "train/run_dir.h"
#include "train/run_files.h"

namespace gmlp {

namespace fs = std::filesystem;

// Everything but out_dir, which names where a run is, not what it is.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(TrainOptions, data_dir, epochs, batch_size, grad_accum, lr, min_lr,
                                                warmup_epochs, weight_decay, clip_norm, label_smoothing, crop_padding,
                                                hflip, mixup_alpha, cutmix_alpha, mix_prob, switch_prob, erase_prob,
                                                ema_decay, seed, train_limit, eval_limit, preset, precision, init, fit)

nlohmann::json TrainOptions::to_json() const { return *this; }

TrainOptions TrainOptions::from_json(const nlohmann::json& j) { return j.get<TrainOptions>(); }

namespace {

// The weights of a new run's model from the checkpoint `path` (TrainOptions::init): the same
// architecture at the model's image size (resampled), with the checkpoint's normalisation; a head
// of another number of classes keeps its fresh initialisation.
void start_from(Model<float>& model, data::Normalization& norm, const std::string& path, GridFit fit) {
  Checkpoint ck = load_checkpoint(path);
  const ModelConfig& want = model.config();
  change_image_size(ck, path, want.img_size, fit);
  nlohmann::json held = ck.config.to_json(), wanted = want.to_json();
  for (const char* free : {"num_classes", "drop_path"}) held.erase(free), wanted.erase(free);
  for (auto it = wanted.begin(); it != wanted.end(); ++it)
    if (held.value(it.key(), nlohmann::json()) != *it)
      fail("invalid --init '", path, "': its model has ", it.key(), " ", held.value(it.key(), nlohmann::json()).dump(),
           ", the run's ", it->dump(), " (only img_size, drop_path and the classes may differ)");
  std::map<std::string, const ParamInfo*> by_name;
  for (const ParamInfo& p : ck.model->params()) by_name[p.name] = &p;
  bool fresh_head = false;  // the only tensors whose shapes may differ: the head's, with the classes
  for (const ParamInfo& p : model.params()) {
    const ParamInfo* s = by_name.at(p.name);
    if (s->shape == p.shape)
      std::copy_n(ck.model->weights() + s->offset, p.numel, model.weights() + p.offset);
    else
      fresh_head = true;
  }
  if (fresh_head)
    ck.notes.push_back(cat("'", path, "' has ", ck.config.num_classes, " classes, the data ", want.num_classes,
                           ": the head starts afresh"));
  norm = ck.norm;
  for (const std::string& note : ck.notes) std::fprintf(stderr, "gmlp: note: %s\n", note.c_str());
}

// A checkpoint of the run in `files` that must be from the state's epoch.
Checkpoint load_at_epoch(const RunFiles& files, const std::string& path, int epoch) {
  Checkpoint ck = load_checkpoint(path);
  if (ck.metadata["epoch"] != std::to_string(epoch))
    fail("failed to resume: '", path, "' is from epoch ", ck.metadata["epoch"], " but '", files.state, "' from epoch ",
         epoch, " (the folder was changed by hand; start again with --overwrite)");
  return ck;
}

}  // namespace

TrainResult train(const ModelConfig& config_in, const TrainOptions& options_in, bool resume, bool overwrite) {
  TrainOptions opt = options_in;
  if (!resume) validate_options(opt);  // before the run folder exists; a resumed run's, once read
  RunDir run(opt.out_dir, "train", resume ? RunStart::resume : overwrite ? RunStart::overwrite : RunStart::fresh);
  const RunFiles files(opt.out_dir);

  std::unique_ptr<Model<float>> model, ema;  // ema: the weights' moving average, when kept
  data::Normalization norm;
  ResumePoint start;
  RunState state;
  if (resume) {
    state = read_run_state(files, &start.metrics);
    if (state.options.contains("vocab_size"))  // LmOptions: a text run
      fail("'", opt.out_dir, "' is a text run, not an image classifier's: resume it with gmlp ",
           state.options.value("task", "").empty() ? "pretrain" : "finetune", " --resume");
    const int epochs_wanted = opt.epochs;
    try {
      opt = TrainOptions::from_json(state.options);
    } catch (const nlohmann::json::exception&) {
      fail("failed to resume from '", files.state, "': metadata 'options' is malformed");
    }
    start.epoch = state.epoch;
    start.step = state.step;
    start.state = &state;
    opt.out_dir = options_in.out_dir;
    opt.bucket_mb = options_in.bucket_mb;  // how the sums run, not what the run is
    if (epochs_wanted > 0) opt.epochs = epochs_wanted;
    validate_options(opt);
    Checkpoint ck = load_at_epoch(files, files.checkpoint, start.epoch);
    model = std::move(ck.model);
    norm = ck.norm;
    if (opt.ema_decay > 0) {
      if (!fs::exists(files.ema))
        fail("failed to resume: the run keeps a moving average (--ema ", opt.ema_decay, ") but '", files.ema,
             "' does not exist");
      ema = std::move(load_at_epoch(files, files.ema, start.epoch).model);
    }
  }
  // The data in the model's input format: a resumed run's, or the one about to be made.
  const ModelConfig& input_cfg = model ? model->config() : config_in;
  const std::string data_dir = opt.data_dir.empty() ? data::kFashionMnistDir : opt.data_dir;
  const GridFit fit = parse_grid_fit(opt.fit);
  // Data-parallel ranks read an image folder's images on demand: each decodes only its own share.
  const data::Reading reading = dist::world().size() > 1 ? data::Reading::on_demand : data::Reading::at_load;
  const data::ImageSet train_set = fit_to_model(
      data::load_images(data_dir, "train", input_cfg.in_chans, input_cfg.img_size, reading), input_cfg, fit);
  const data::ImageSet test_set = fit_to_model(
      data::load_images(data_dir, "test", input_cfg.in_chans, input_cfg.img_size, reading), input_cfg, fit);
  if (!model) {
    ModelConfig config = config_in;
    config.num_classes = train_set.classes;  // one output per class of the training data
    model = make_model<float>(config);
    Rng init_rng(opt.seed);
    model->init(init_rng);
    norm = data::Normalization::gmlp_default(config.in_chans);
    if (!opt.init.empty()) start_from(*model, norm, opt.init, fit);
    if (opt.ema_decay > 0) {  // the average starts at the initial weights, as timm's
      ema = make_model<float>(config);
      std::copy_n(model->weights(), model->num_params(), ema->weights());
    }
  }
  check_compatible(model->config(), train_set, data_dir);
  ImageTask task(*model, ema.get(), train_set, test_set, norm, opt);
  return run_loop(task, opt, opt.to_json(), run, files, std::move(start));
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
        fail("'", options.out_dir, "' holds a run of ", run.epoch(), run.epoch() == 1 ? " epoch" : " epochs", " with ",
             it.key(), " ", shown(held.value(it.key(), nlohmann::json())), ", not ", shown(*it),
             ": give compare that run's options to continue it, or --overwrite to train it again");
  };
  // The held options read as a run of today reads them: a field it does not record has its default.
  nlohmann::json held = read_run_state(files, nullptr).options;
  try {
    held = TrainOptions::from_json(held).to_json();
  } catch (const nlohmann::json::exception&) {
    fail("failed to read '", files.state, "': metadata 'options' is malformed");
  }
  same(held, options.to_json(), "epochs");
  const st::File checkpoint = st::File::open(files.checkpoint);
  const auto config_meta = checkpoint.metadata().find("config");
  nlohmann::json held_config;
  if (config_meta != checkpoint.metadata().end())
    held_config = nlohmann::json::parse(config_meta->second, nullptr, false);
  same(held_config.is_object() ? held_config : nlohmann::json::object(), config.to_json(), "num_classes");
  return true;
}

}  // namespace gmlp
