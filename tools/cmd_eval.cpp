// gmlp eval: accuracy of a checkpoint on a Fashion-MNIST split, and optionally its logits.
#include <cstdio>

#include "commands.h"
#include "core/error.h"
#include "core/matmul.h"
#include "core/threads.h"
#include "data/idx.h"
#include "io/npy.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"

namespace gmlp::cli {

void add_eval(CLI::App& app) {
  struct Args {
    std::string checkpoint, split = "test", logits, data_dir = data::kFashionMnistDir, precision = "f32";
    int limit = 0, batch_size = 256, threads = 0;
    bool json = false, tta_flip = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("eval", "Evaluate a checkpoint on Fashion-MNIST");
  sub->add_option("--checkpoint", args->checkpoint, "Checkpoint (.safetensors, gmlp or timm)")->required();
  sub->add_option("--split", args->split, "Split")->check(CLI::IsMember({"train", "test"}))->capture_default_str();
  sub->add_option("--limit", args->limit, "Only the first N images, in file order (0: all)")->capture_default_str();
  sub->add_option("--logits", args->logits, "Write the logits as float32 .npy of shape [N, K]");
  sub->add_option("--batch-size", args->batch_size, "Images per forward pass")->capture_default_str();
  sub->add_option("--data-dir", args->data_dir, "Folder with the IDX files")->capture_default_str();
  sub->add_flag("--json", args->json, "Print one JSON object");
  sub->add_flag("--tta-flip", args->tta_flip, "Average each image's logits with its mirror image's (test-time augmentation)");
  sub->add_option("--precision", args->precision, "Matrix products: f32 or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}))->capture_default_str();
  add_threads_option(*sub, args->threads);
  sub->callback([args] {
    set_threads(args->threads);
    use_precision(args->precision);
    Checkpoint ck = load_checkpoint(args->checkpoint);
    const data::ImageSet set = data::load_fashion_mnist(args->data_dir, args->split);
    check_compatible(ck.config, set, args->data_dir);
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
