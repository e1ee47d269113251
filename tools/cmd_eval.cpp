// gmlp eval: accuracy of a checkpoint on a Fashion-MNIST split, and optionally its logits.
#include <cstdio>

#include "commands.h"
#include "core/error.h"
#include "core/matmul.h"
#include "core/threads.h"
#include "data/image_folder.h"
#include "io/npy.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"

namespace gmlp::cli {

namespace {
// The data's class ids must mean what they meant in training (a timm file names no classes).
void check_same_classes(const std::vector<std::string>& trained, const std::vector<std::string>& data,
                        const std::string& checkpoint, const std::string& data_dir) {
  if (trained.empty() || trained == data) return;
  if (trained.size() != data.size())
    fail("data '", data_dir, "' has ", data.size(), " classes, but '", checkpoint, "' was trained on ",
         trained.size());
  for (size_t k = 0; k < data.size(); ++k)
    if (data[k] != trained[k])
      fail("data '", data_dir, "' calls class ", k, " '", data[k], "', but '", checkpoint,
           "' was trained with it as '", trained[k], "'");
}
}  // namespace

void add_eval(CLI::App& app) {
  struct Args {
    std::string checkpoint, split = "test", logits, data_dir = data::kFashionMnistDir, precision = "f32";
    int limit = 0, batch_size = 256, threads = 0;
    bool json = false, tta_flip = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("eval", "Evaluate a checkpoint on Fashion-MNIST, CIFAR-10 or an image folder");
  sub->add_option("--checkpoint", args->checkpoint, "Checkpoint (.safetensors, gmlp or timm)")->required();
  sub->add_option("--split", args->split, "Split")->check(CLI::IsMember({"train", "test"}))->capture_default_str();
  sub->add_option("--limit", args->limit, "Only the first N images, in file order (0: all)")->capture_default_str();
  sub->add_option("--logits", args->logits, "Write the logits as float32 .npy of shape [N, K]");
  sub->add_option("--batch-size", args->batch_size, "Images per forward pass")->capture_default_str();
  sub->add_option("--data-dir", args->data_dir, kDataDirHelp);
  sub->add_flag("--json", args->json, "Print one JSON object");
  sub->add_flag("--tta-flip", args->tta_flip, "Average each image's logits with its mirror image's (test-time augmentation)");
  sub->add_option("--precision", args->precision, "Matrix products: f32 or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}))->capture_default_str();
  add_threads_option(*sub, args->threads);
  sub->callback([args] {
    set_threads(args->threads);
    use_precision(args->precision);
    Checkpoint ck = load_checkpoint(args->checkpoint);
    const data::ImageSet set = data::load_images(args->data_dir, args->split, ck.config.in_chans, ck.config.img_size);
    check_compatible(ck.config, set, args->data_dir);
    check_same_classes(ck.class_names, set.class_names, args->checkpoint, args->data_dir);
    if (args->batch_size <= 0) fail("invalid --batch-size ", args->batch_size, ": must be positive");
    ck.model->plan(args->batch_size, Mode::infer);
    std::vector<float> logits;
    const EvalResult r = evaluate(*ck.model, set, ck.norm, args->limit,
                                  args->logits.empty() ? nullptr : &logits, args->tta_flip);
    if (!args->logits.empty())
      save_npy_f32(args->logits, logits.data(), {r.count, ck.config.num_classes});
    if (args->json)
      std::printf("{\"count\": %d, \"accuracy\": %.6f, \"loss\": %.6f, \"tta_flip\": %s, \"seconds\": %.3f}\n",
                  r.count, r.accuracy, r.loss, args->tta_flip ? "true" : "false", r.seconds);
    else
      std::printf("%s %s%s: accuracy %.2f%% (%d images), loss %.4f, %.1f s\n",
                  args->checkpoint.c_str(), args->split.c_str(), args->tta_flip ? " (flip TTA)" : "",
                  100 * r.accuracy, r.count, r.loss, r.seconds);
  });
}

}  // namespace gmlp::cli
