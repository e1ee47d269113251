// The `gmlp` command line: one function per subcommand, each registering its options (declared
// once, with defaults, so --help is generated) and its action on the parent app.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "nn/config.h"
#include "nn/text_model.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace gmlp::cli {

void add_train(CLI::App& app);
void add_eval(CLI::App& app);
void add_predict(CLI::App& app);
void add_info(CLI::App& app);
void add_bench(CLI::App& app);
void add_viz(CLI::App& app);
void add_compare(CLI::App& app);
void add_text(CLI::App& app);  // pretrain, finetune, fill-mask
void add_export(CLI::App& app);
void add_serve(CLI::App& app);
// Every subcommand above and --config, as `gmlp` has them (main.cpp; fuzz/fuzz_config.cpp).
void add_commands(CLI::App& app);

// --config FILE.json on every subcommand (config_file.cpp): add_config_option registers it, for
// --help; expand_config turns the file's entries into arguments the command line does not give.
void add_config_option(CLI::App& app);
std::vector<std::string> expand_config(const CLI::App& app, std::vector<std::string> args);

// What --data-dir reads (train, compare, eval): data::load_images.
inline constexpr const char* kDataDirHelp =
    "Fashion-MNIST's IDX files (default: /usr/share/datasets/fashion-mnist), CIFAR-10's binary "
    "batches, or an image folder: {dir}/train/{class}/*.png|jpg and {dir}/test/{class}/...";

// find_preset and find_text_preset, for the commands that take one kind: a name of the other
// kind fails with one line naming the command that takes it ("'kjv-gmlp' is a text preset: ...").
const Preset& image_preset(const std::string& name);
const TextPreset& text_preset(const std::string& name);

// --threads, shared by every subcommand: 0 = all cores this process may use; more than those
// (available_cpus) is a usage error.
void add_threads_option(CLI::App& sub, int& threads);

// Validators of numeric options (validators.cpp), shared by every subcommand: a value out of
// range is a usage error naming the flag, what was expected and what was found, e.g.
// "--eval-limit: expected a whole number >= 1, found '0' (hint)".
CLI::Validator at_least(long long min, const std::string& hint = "");
CLI::Validator whole_in(long long min, long long max, const std::string& hint = "");
// A seed: a whole number that fits 64 bits unsigned ("-1" would wrap to 2^64 - 1).
CLI::Validator seed_value();
// A finite number (nan and inf are refused) between lo and hi, each end included or not;
// hi = INFINITY: no upper bound. "--lr: expected a finite number >= 0, found 'nan'".
enum class Ends { closed, open, closed_open, open_closed };
CLI::Validator real_in(double lo, double hi, Ends ends = Ends::closed, const std::string& hint = "");

// Thrown by a command that has printed its errors itself (predict, one line per unreadable
// image) and must still exit with status 1.
struct Reported {};

// What reading a timm file assumed (Checkpoint::notes), one "gmlp: note:" line each on stderr.
void print_notes(const std::vector<std::string>& notes);
// --img-size of eval and predict (0: the model's own).
CLI::Option* add_img_size_option(CLI::App& sub, int& img_size);
// --fit of train and eval: how images of another size than the model's are brought to it.
CLI::Option* add_fit_option(CLI::App& sub, std::string& fit);

// load_checkpoint (train/checkpoint.h); at img_size (> 0), its grid-bound weights resampled for
// images brought to it by `fit` (change_image_size); then print_notes.
Checkpoint load_image_checkpoint(const std::string& path, int img_size = 0, GridFit fit = GridFit::resize);

// Probes an output file or folder for writing before a command's work (io/writable.h); failure
// is one line naming the flag: "invalid --logits 'out/l.npy': its folder 'out' does not exist".
void check_output_file(const std::string& path, const std::string& flag);
void check_output_folder(const std::string& dir, const std::string& flag);

// --eval-limit N, shared by train, compare, eval, pretrain and finetune: evaluate on N `items`
// ("test images") drawn at random by --seed (train/eval_subset.h), in each class's proportion when
// `stratified` (classification), every epoch when `training`.
// N < 1 is a usage error; not given, `limit` keeps 0: all.
CLI::Option* add_eval_limit_option(CLI::App& sub, int& limit, const std::string& items, bool training = true,
                                   bool stratified = true);

// --overwrite, shared by train, compare, pretrain and finetune: a new run may replace `what`
// (run_dir.h refuses a folder that holds a run without it).
void add_overwrite_option(CLI::App& sub, bool& overwrite, const std::string& what);
// --resume continues a run with its own options: any option of `sub` the command line (or
// --config) gives besides `honoured` (--resume first, then --epochs, --threads, ...) is a usage
// error naming it.
void check_resume_flags(const CLI::App& sub, const std::vector<std::string>& honoured);

// The training flags of `train` and `compare`: optimiser, schedule, augmentation, DeiT's
// regularisation, model overrides (--set key=value), precision. Options the user did not give
// fall back to the preset's defaults in resolve_training.
// The options every training command shares (RunOptions, loop.h), registered once for train,
// compare, pretrain and finetune: `items` names what a batch holds ("Images"), and
// preset_defaults says whether --epochs, --batch-size, --lr and --weight-decay default to the
// preset's (else their default is shown).
struct RunFlags {
  CLI::Option *epochs = nullptr, *batch = nullptr, *lr = nullptr, *wd = nullptr, *accum = nullptr;
};
RunFlags add_run_flags(CLI::App& sub, RunOptions& options, const std::string& items, bool preset_defaults);
// A new run's micro-batches when --grad-accum is not given: one per rank of the job (mpirun -np N
// gives N; a single process, 1), so that N ranks and --grad-accum N are the same run.
void default_grad_accum(RunOptions& options, const RunFlags& flags);

struct TrainFlags {
  TrainOptions opt;
  float drop_path = -1;
  std::vector<std::string> sets;
  RunFlags run;
};
void add_train_flags(CLI::App& sub, TrainFlags& flags);
// --set key=value overrides on a config's JSON (existing fields only; numbers or strings), and
// on a ModelConfig (validated).
nlohmann::json apply_sets(nlohmann::json config, const std::vector<std::string>& sets);
ModelConfig apply_sets(ModelConfig config, const std::vector<std::string>& sets);
std::pair<ModelConfig, TrainOptions> resolve_training(const Preset& preset, const TrainFlags& flags);

// A checkpoint's metadata entry `key` as JSON (its run record, "training", and the like), or null
// when absent, discarded (is_discarded()) when not JSON.
nlohmann::json meta_json(const std::map<std::string, std::string>& meta, const char* key);

}  // namespace gmlp::cli
