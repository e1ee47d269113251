// gmlp viz: pictures of runs — the learned spatial weights of chosen blocks, the training curves
// of a run, and several runs on shared axes — as PNG.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "commands.h"
#include "core/error.h"
#include "train/checkpoint.h"
#include "train/run_files.h"
#include "viz/figures.h"

namespace gmlp::cli {
namespace {
viz::XAxis x_axis(const std::string& against) { return against == "time" ? viz::XAxis::time : viz::XAxis::epoch; }
}  // namespace

void add_viz(CLI::App& app) {
  struct Args {
    std::string checkpoint, out = ".", color_scale = "tile", against = "epoch";
    std::vector<std::string> metrics;
    std::vector<int> blocks;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("viz", "Draw a checkpoint's spatial weights and a run's training curves as PNG");
  sub->add_option("--checkpoint", args->checkpoint,
                  "An image checkpoint of a gmlp, amlp or resmlp model: draws each chosen block's "
                  "spatial matrix W (spatial_block<N>.png)");
  sub->add_option("--blocks", args->blocks, "Blocks to draw, e.g. 0,3 (default: first, middle, last)")
      ->delimiter(',')
      ->check(at_least(0));
  sub->add_option("--color-scale", args->color_scale,
                  "Colours of the spatial weights: tile (each tile by its own largest |w|: shapes) or "
                  "shared (one scale for the whole matrix: magnitudes)")
      ->check(CLI::IsMember({"tile", "shared"}))
      ->capture_default_str();
  sub->add_option("--metrics", args->metrics,
                  "Runs' metrics.jsonl: one draws its accuracy and loss against epoch (curves.png); several "
                  "draw their test accuracy, or dev loss when pretraining, on shared axes (runs.png)");
  sub->add_option("--against", args->against,
                  "What --metrics' curves are drawn against: epoch, or time (minutes since the run started, "
                  "evaluation included, from each epoch's seconds): runs of different speeds side by side")
      ->check(CLI::IsMember({"epoch", "time"}))
      ->capture_default_str();
  sub->add_option("--out", args->out, "Folder for the PNG files")->capture_default_str();
  // A run's rows, at least one, each with what the x axis needs.
  auto metrics_of = [args](const std::string& path) {
    auto rows = read_metrics(path);
    if (rows.empty()) fail("failed to read '", path, "': no epochs in it");
    try {
      viz::x_values(rows, x_axis(args->against));
    } catch (const Error& e) {
      fail("--against ", args->against, ": '", path, "' ", e.what());
    }
    return rows;
  };
  sub->callback([args, metrics_of] {
    if (args->checkpoint.empty() && args->metrics.empty())
      throw CLI::ValidationError("viz", "give --checkpoint, --metrics, or both");
    check_output_folder(args->out, "--out");
    // Everything is read and checked before the first file is written.
    Checkpoint ck;
    std::string matrix;  // the learned token-mixing matrix: gMLP/aMLP's gate projection, ResMLP's linear_tokens
    std::vector<int> blocks = args->blocks;
    if (!args->checkpoint.empty()) {
      ck = load_image_checkpoint(args->checkpoint);
      const ModelConfig& cfg = ck.config;
      if (const char* spatial = model_kind_info(cfg.model).spatial_matrix) {
        matrix = spatial;
      } else {
        std::vector<std::string> kinds;  // those that have one
        for (const ModelKindInfo& row : kModelKindTable)
          if (row.spatial_matrix) kinds.push_back(row.name);
        std::string with;  // "gmlp, amlp and resmlp"
        for (size_t i = 0; i < kinds.size(); ++i)
          with += (i == 0 ? "" : i + 1 < kinds.size() ? ", " : " and ") + kinds[i];
        fail("checkpoint '", args->checkpoint, "' is a ", cfg.model, ", which has no N×N spatial matrix to draw (",
             with, " have one)");
      }
      if (blocks.empty()) blocks = {0, cfg.depth / 2, cfg.depth - 1};
      blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
      for (int b : blocks)
        if (b < 0 || b >= cfg.depth) fail("invalid block ", b, ": the checkpoint has blocks 0..", cfg.depth - 1);
    }
    // Each run is named by its folder: runs/lm/kjv-gmlp/metrics.jsonl is kjv-gmlp.
    std::vector<std::pair<std::string, std::vector<nlohmann::json>>> runs;
    for (const std::string& m : args->metrics) {
      std::string name = std::filesystem::path(m).parent_path().filename().string();
      runs.emplace_back(name.empty() ? m : name, metrics_of(m));
    }
    std::error_code ec;
    std::filesystem::create_directories(args->out, ec);
    if (ec) fail("failed to create folder '", args->out, "': ", ec.message());
    auto out = [&](const std::string& name) { return (std::filesystem::path(args->out) / name).string(); };
    for (int b : blocks) {
      const ModelConfig& cfg = ck.config;
      const ParamInfo& p = ck.model->param("blocks." + std::to_string(b) + matrix);
      const std::string path = out("spatial_block" + std::to_string(b) + ".png");
      viz::render_spatial_weights(ck.model->weights() + p.offset, cfg.grid(),
                                  "block " + std::to_string(b) + ": rows of W on the " + std::to_string(cfg.grid()) +
                                      "x" + std::to_string(cfg.grid()) + " patch grid",
                                  args->color_scale == "shared" ? viz::ColorScale::shared : viz::ColorScale::tile)
          .save_png(path);
      std::printf("%s\n", path.c_str());
    }
    if (runs.size() == 1) {
      const std::string path = out("curves.png");
      viz::render_training_curves(runs[0].second, args->metrics[0], x_axis(args->against)).save_png(path);
      std::printf("%s\n", path.c_str());
    } else if (runs.size() > 1) {
      const std::string path = out("runs.png");
      viz::render_runs(runs, "runs", x_axis(args->against)).save_png(path);
      std::printf("%s\n", path.c_str());
    }
  });
}

}  // namespace gmlp::cli
