// gmlp compare: trains several models under one budget (same epochs, data, augmentation, seed
// and optimiser settings), then writes what a reader wants side by side:
//   DIR/compare.md      model, params, FLOPs/image, train time, best and final test accuracy
//                       (and the final accuracy of the weights' moving average, with --ema)
//   DIR/compare.json    the same, for machines
//   DIR/accuracy.png    test accuracy against epoch, every model in one plot
//   DIR/train_test.png  train against test accuracy, one panel per model, all on the same axes
//   DIR/<label>/        each model's run folder (checkpoint, train state, metrics.jsonl)
// A model is a preset, optionally with config overrides: "fmnist-gmlp:gate=additive". The same
// command again continues a stopped comparison: finished runs are kept, an unfinished one
// continues from its last epoch; a model folder holding a run of other settings is refused
// before any training, unless --overwrite starts every model afresh.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "core/error.h"
#include "core/threads.h"
#include "dist/communicator.h"
#include "io/atomic_file.h"
#include "nn/model.h"
#include "train/checkpoint.h"
#include "train/eval_subset.h"
#include "train/run_dir.h"
#include "train/run_files.h"
#include "viz/figures.h"

namespace gmlp::cli {
namespace {

namespace fs = std::filesystem;

struct Row {
  std::string label, model;
  int64_t params = 0;
  double mflops = 0, seconds = 0, images_per_s = 0, best = 0, final = 0;
  double final_ema = 0;  // the weights' moving average at the end (with --ema)
  int epochs = 0;
  std::vector<nlohmann::json> metrics;
};

// "preset:key=value:key=value" → the preset and its overrides.
std::pair<std::string, std::vector<std::string>> parse_entry(const std::string& entry) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= entry.size(); ++i)
    if (i == entry.size() || entry[i] == ':') parts.push_back(entry.substr(start, i - start)), start = i + 1;
  return {parts[0], {parts.begin() + 1, parts.end()}};
}

std::string folder_name(std::string label) {
  for (char& c : label)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) c = '_';
  return label;
}

// "2,000 of 10,000" when the runs evaluated a subset of the test images (--eval-limit), else "".
std::string test_subset(const std::vector<Row>& rows) {
  for (const Row& r : rows)
    if (!r.metrics.empty())
      return subset_label(r.metrics.back().value("test_count", int64_t{0}),
                          r.metrics.back().value("test_total", int64_t{0}));
  return "";
}

std::string markdown(const std::vector<Row>& rows, const TrainOptions& opt) {
  const bool ema = opt.ema_decay > 0;
  char line[512];
  std::string md =
      std::string("| model | params | MFLOPs/image | train time | images/s | best test acc | final test acc |") +
      (ema ? " final test acc, EMA |\n" : "\n") + "|---|---:|---:|---:|---:|---:|---:|" + (ema ? "---:|\n" : "\n");
  for (const Row& r : rows) {
    std::snprintf(line, sizeof line, "| %s | %.2fM | %.1f | %.1f min | %.0f | %.2f %% | %.2f %% |", r.label.c_str(),
                  r.params / 1e6, r.mflops, r.seconds / 60, r.images_per_s, 100 * r.best, 100 * r.final);
    md += line;
    if (ema) std::snprintf(line, sizeof line, " %.2f %% |", 100 * r.final_ema), md += line;
    md += "\n";
  }
  std::snprintf(line, sizeof line,
                "\n%d epochs each, batch %d, lr %g, weight decay %g, label smoothing %g, mixup %g, "
                "cutmix %g, random erasing %g, seed %llu; train time excludes evaluation.",
                opt.epochs, opt.batch_size, opt.lr, opt.weight_decay, opt.label_smoothing, opt.mixup_alpha,
                opt.cutmix_alpha, opt.erase_prob, (unsigned long long)opt.seed);
  md += line;
  if (const std::string subset = test_subset(rows); !subset.empty())
    md += " Test accuracy on " + subset + " test images, drawn at random by the seed (--eval-limit).";
  if (ema)
    std::snprintf(line, sizeof line, " EMA: the weights' moving average, decay %g per step.", opt.ema_decay),
        md += line;
  return md + "\n";
}

void write_figures(const std::vector<Row>& rows, const std::string& dir) {
  const std::string subset = test_subset(rows);
  viz::Panel all{subset.empty() ? "test accuracy (%)" : "test accuracy (%), " + subset + " images", "epoch", {}};
  std::vector<viz::Panel> each;
  for (size_t i = 0; i < rows.size(); ++i) {
    viz::Curve test{rows[i].label, {}, {}, viz::palette(int(i))};
    viz::Curve tr{"train", {}, {}, {33, 102, 172}}, te{"test", {}, {}, {214, 96, 77}};
    for (const auto& m : rows[i].metrics) {
      const double e = m.value("epoch", 0.0);
      test.x.push_back(e), test.y.push_back(100 * m.value("test_acc", 0.0));
      tr.x.push_back(e), tr.y.push_back(100 * m.value("train_acc", 0.0));
      te.x.push_back(e), te.y.push_back(100 * m.value("test_acc", 0.0));
    }
    all.curves.push_back(test);
    each.push_back({rows[i].label + ": accuracy (%)", "epoch", {tr, te}});
  }
  viz::render_panels({all}, "gmlp compare").save_png((fs::path(dir) / "accuracy.png").string());
  // One quantity across models: the panels share their axes, so their heights compare.
  viz::render_panels(
      each, subset.empty() ? "train and test accuracy" : "train and test accuracy (test: " + subset + " images)", 3,
      true)
      .save_png((fs::path(dir) / "train_test.png").string());
}

}  // namespace

void add_compare(CLI::App& app) {
  struct Args {
    std::vector<std::string> models;
    std::string out = "runs/compare";
    TrainFlags flags;
    int threads = 0;
    bool overwrite = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "compare",
      "Train several image models under one budget; write a table and plots of the result (run again to resume)");
  sub->add_option("models", args->models, "Presets to train, each optionally with overrides: fmnist-gmlp:gate=additive")
      ->required();
  add_train_flags(*sub, args->flags);
  sub->add_option("--out", args->out, "Folder for the runs, compare.md/.json and the plots")->capture_default_str();
  add_overwrite_option(*sub, args->overwrite, "the runs these models have in the --out folder");
  add_threads_option(*sub, args->threads);
  sub->callback([args] {
    set_threads(args->threads);
    // Resolve everything first, so a typo fails before hours of training (and before the folder).
    struct Job {
      std::string label;
      ModelConfig config;
      TrainOptions options;
    };
    std::vector<Job> jobs;
    for (const std::string& entry : args->models) {
      const auto [preset, sets] = parse_entry(entry);
      TrainFlags flags = args->flags;
      flags.sets.insert(flags.sets.end(), sets.begin(), sets.end());
      auto [cfg, opt] = resolve_training(image_preset(preset), flags);
      opt.out_dir = (fs::path(args->out) / folder_name(entry)).string();
      opt.preset = entry;
      jobs.push_back({entry, cfg, opt});
    }
    // Under mpirun every rank trains every model; rank 0 alone takes the folder and writes the
    // table and plots.
    dist::Communicator& comm = dist::world();
    const bool writes = comm.rank() == 0;
    std::unique_ptr<FolderLock> lock;
    if (writes) {
      std::error_code ec;
      fs::create_directories(args->out, ec);
      if (ec) fail("failed to create '", args->out, "': ", ec.message());
      // One comparison in a folder at a time, and every model's folder checked before any work.
      lock = std::make_unique<FolderLock>(args->out);
      remove_temporaries(args->out);  // of a comparison killed while it wrote its table
    }
    comm.barrier();
    const StopSignals signals;
    std::vector<bool> resume;
    resume.reserve(jobs.size());
    for (const Job& job : jobs) resume.push_back(!args->overwrite && holds_same_run(job.config, job.options));
    comm.barrier();  // every rank has read the folders before rank 0 overwrites any
    if (args->overwrite)
      for (const Job& job : jobs) RunDir(job.options.out_dir, "train", RunStart::overwrite);
    auto stopped = [&](Interrupted& stop) {  // what main prints: the comparison, not the model
      stop.command = "compare", stop.dir = args->out;
      return stop;
    };
    if (writes)
      for (const char* name : {"compare.md", "compare.json", "accuracy.png", "train_test.png"})  // before training
        check_output_file((fs::path(args->out) / name).string(), "--out");
    std::vector<Row> rows;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const Job& job = jobs[i];
      std::fprintf(stderr, "gmlp compare: [%zu/%zu] %s\n", i + 1, jobs.size(), job.label.c_str());
      try {
        train(job.config, job.options, resume[i]);
      } catch (Interrupted& stop) {
        throw stopped(stop);
      }
      if (!writes) {
        if (const int sig = StopSignals::received_anywhere(); sig && i + 1 < jobs.size()) {
          Interrupted stop;
          stop.signal = sig;
          throw stopped(stop);
        }
        continue;
      }
      Row r;
      r.label = job.label;
      r.model = model_kind_name(job.config.model);
      // The trained model, whose head follows the data's classes.
      const auto model = load_checkpoint((fs::path(job.options.out_dir) / "checkpoint.safetensors").string()).model;
      r.params = model->num_trainable();
      r.mflops = model->flops_per_image() / 1e6;
      r.metrics = read_metrics((fs::path(job.options.out_dir) / "metrics.jsonl").string());
      std::vector<double> speeds;
      for (const auto& m : r.metrics) {
        r.seconds += m.value("seconds", 0.0) - m.value("eval_seconds", 0.0);
        r.best = std::max(r.best, m.value("test_acc", 0.0));
        speeds.push_back(m.value("images_per_s", 0.0));
      }
      if (!r.metrics.empty()) {
        r.final = r.metrics.back().value("test_acc", 0.0);
        r.final_ema = r.metrics.back().value("test_acc_ema", 0.0);
      }
      if (!speeds.empty()) {
        std::sort(speeds.begin(), speeds.end());
        r.images_per_s = speeds[speeds.size() / 2];
      }
      r.epochs = int(r.metrics.size());
      rows.push_back(r);
      // After every model: a killed comparison still leaves a table of what finished.
      write_file_atomic((fs::path(args->out) / "compare.md").string(), markdown(rows, job.options));
      nlohmann::json j = nlohmann::json::array();
      for (const Row& row : rows) {
        j.push_back({{"label", row.label},
                     {"model", row.model},
                     {"params", row.params},
                     {"mflops_per_image", row.mflops},
                     {"train_seconds", row.seconds},
                     {"images_per_s", row.images_per_s},
                     {"best_test_acc", row.best},
                     {"final_test_acc", row.final},
                     {"epochs", row.epochs}});
        if (job.options.ema_decay > 0) j.back()["final_test_acc_ema"] = row.final_ema;
        if (!row.metrics.empty()) {  // how many test images the accuracies are of
          j.back()["test_count"] = row.metrics.back().value("test_count", int64_t{0});
          j.back()["test_total"] = row.metrics.back().value("test_total", int64_t{0});
        }
      }
      write_file_atomic((fs::path(args->out) / "compare.json").string(), j.dump(2) + "\n");
      write_figures(rows, args->out);
      if (const int sig = StopSignals::received_anywhere(); sig && i + 1 < jobs.size()) {
        Interrupted stop;
        stop.signal = sig;
        throw stopped(stop);
      }
    }
    if (!writes) return;
    std::printf("%s", markdown(rows, jobs.back().options).c_str());
  });
}

}  // namespace gmlp::cli
