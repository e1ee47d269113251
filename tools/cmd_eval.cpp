// gmlp eval: accuracy of a checkpoint on a split of Fashion-MNIST, CIFAR-10 or an image folder,
// or a random subset of it, and optionally its logits.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "core/matmul.h"
#include "core/threads.h"
#include "data/image_folder.h"
#include "io/npy.h"
#include "train/checkpoint.h"
#include "train/eval_subset.h"
#include "train/evaluate.h"

namespace gmlp::cli {

namespace {
// The data's class ids must mean what they meant in training (a timm file names no classes).
void check_same_classes(const std::vector<std::string>& trained, const std::vector<std::string>& data,
                        const std::string& checkpoint, const std::string& data_dir) {
  if (trained.empty() || trained == data) return;
  if (trained.size() != data.size())
    fail("data '", data_dir, "' has ", data.size(), " classes, but '", checkpoint, "' was trained on ", trained.size());
  for (size_t k = 0; k < data.size(); ++k)
    if (data[k] != trained[k])
      fail("data '", data_dir, "' calls class ", k, " '", data[k], "', but '", checkpoint, "' was trained with it as '",
           trained[k], "'");
}

// Whether the checkpoint's run record says it was trained without random flips (--no-hflip).
bool trained_without_flips(const std::map<std::string, std::string>& metadata) {
  const nlohmann::json t = meta_json(metadata, "training");
  if (!t.is_object() || !t.contains("options") || !t["options"].is_object()) return false;
  const nlohmann::json& o = t["options"];
  return o.contains("hflip") && o["hflip"].is_boolean() && !o["hflip"].get<bool>();
}
}  // namespace

void add_eval(CLI::App& app) {
  struct Args {
    std::string checkpoint, split = "test", logits, data_dir = data::kFashionMnistDir, precision = "f32",
                            fit = "resize";
    int limit = 0, eval_limit = 0, batch_size = 256, threads = 0, img_size = 0;
    uint64_t seed = 0;
    bool json = false, tta_flip = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "eval", "Accuracy and loss of an image classifier checkpoint on Fashion-MNIST, CIFAR-10 or an image folder");
  sub->add_option(
         "--checkpoint", args->checkpoint,
         "An image classifier checkpoint (.safetensors: gmlp train's, or a timm state_dict: gMLP, Mixer, ResMLP, ViT)")
      ->required();
  sub->add_option("--split", args->split, "The split to evaluate: train or test")
      ->check(CLI::IsMember({"train", "test"}))
      ->capture_default_str();
  auto* limit = sub->add_option("--limit", args->limit, "Only the first N images, in file order (0: all)")
                    ->check(at_least(0))
                    ->capture_default_str();
  auto* eval_limit = add_eval_limit_option(*sub, args->eval_limit, "images", false);
  sub->add_option("--seed", args->seed, "Seed of --eval-limit's draw (a run's --seed draws its subset)")
      ->check(seed_value())
      ->capture_default_str();
  auto* logits = sub->add_option("--logits", args->logits,
                                 "Write the logits as float32 .npy of shape [N, K], one row per image in file order");
  eval_limit->excludes(limit)->excludes(logits);
  sub->add_option("--batch-size", args->batch_size, "Images per forward pass (at most the images evaluated)")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_option("--data-dir", args->data_dir, kDataDirHelp);
  sub->add_flag("--json", args->json, "Print one JSON object");
  sub->add_flag("--tta-flip", args->tta_flip,
                "Average each image's logits with its mirror image's (test-time augmentation)");
  sub->add_option("--precision", args->precision, "Matrix products: f32, bf16, or auto (bf16 where the CPU has AMX)")
      ->check(CLI::IsMember({"f32", "bf16", "auto"}))
      ->capture_default_str();
  add_img_size_option(*sub, args->img_size);
  add_fit_option(*sub, args->fit);
  add_threads_option(*sub, args->threads);
  sub->callback([args] {
    if (!args->logits.empty()) check_output_file(args->logits, "--logits");  // before the work
    set_threads(args->threads);
    use_precision(args->precision);
    const GridFit fit = parse_grid_fit(args->fit);
    Checkpoint ck = load_image_checkpoint(args->checkpoint, args->img_size, fit);
    const data::ImageSet set = fit_to_model(
        data::load_images(args->data_dir, args->split, ck.config.in_chans, ck.config.img_size), ck.config, fit);
    check_compatible(ck.config, set, args->data_dir);
    check_same_classes(ck.class_names, set.class_names, args->checkpoint, args->data_dir);
    if (args->tta_flip && trained_without_flips(ck.metadata))
      std::fprintf(stderr,
                   "gmlp: note: '%s' was trained with --no-hflip: --tta-flip shows it mirror images it never saw, "
                   "and its accuracy may fall\n",
                   args->checkpoint.c_str());
    // The images: all, the first --limit, or --eval-limit drawn by --seed as train draws them.
    std::vector<int64_t> items =
        eval_subset(std::vector<int>(set.labels.begin(), set.labels.end()), args->eval_limit, args->seed);
    if (args->limit > 0 && args->limit < set.count) items.resize(size_t(args->limit));
    // A batch larger than the images evaluated would only plan memory for images there are not.
    ck.model->plan(std::min<int64_t>(args->batch_size, std::max<int64_t>(1, int64_t(items.size()))), Mode::infer);
    ck.model->freeze();
    const std::string whole = eval_limit_note(args->eval_limit, set.count, args->split + " images");
    if (!whole.empty()) std::fprintf(stderr, "gmlp: %s\n", whole.c_str());
    std::vector<float> logits;
    const EvalResult r = evaluate(*ck.model, set, ck.norm,
                                  {.items = &items,
                                   .logits = args->logits.empty() ? nullptr : &logits,
                                   .flip_tta = args->tta_flip,
                                   .progress = args->split.c_str()});
    if (!args->logits.empty()) save_npy_f32(args->logits, logits.data(), {r.count, ck.config.num_classes});
    if (args->json)
      std::printf(
          "{\"count\": %d, \"total\": %d, \"accuracy\": %.6f, \"loss\": %.6f, \"tta_flip\": %s, \"seconds\": %.3f}\n",
          r.count, r.total, r.accuracy, r.loss, args->tta_flip ? "true" : "false", r.seconds);
    else
      std::printf("%s %s%s: accuracy %.2f%% (%s images), loss %.4f, %.1f s\n", args->checkpoint.c_str(),
                  args->split.c_str(), args->tta_flip ? " (flip TTA)" : "", 100 * r.accuracy,
                  (r.count < r.total ? subset_label(r.count, r.total) : thousands(r.count)).c_str(), r.loss, r.seconds);
  });
}

}  // namespace gmlp::cli
