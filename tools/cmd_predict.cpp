// gmlp predict: the top classes of PNG/JPEG images under a checkpoint.
#include <algorithm>
#include <cstdio>
#include <numeric>

#include "commands.h"
#include "core/threads.h"
#include "data/transform.h"
#include "io/image.h"
#include "ops/cross_entropy.h"
#include "train/checkpoint.h"

namespace gmlp::cli {

void add_predict(CLI::App& app) {
  struct Args {
    std::string checkpoint;
    std::vector<std::string> images;
    int top = 3, threads = 0;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("predict", "Classify PNG/JPEG images with a checkpoint");
  sub->add_option("--checkpoint", args->checkpoint, "Checkpoint (.safetensors)")->required();
  sub->add_option("images", args->images, "Image files (resized and converted to the model's input)")->required();
  sub->add_option("--top", args->top, "Classes to print per image")->capture_default_str();
  add_threads_option(*sub, args->threads);
  sub->callback([args] {
    set_threads(args->threads);
    Checkpoint ck = load_checkpoint(args->checkpoint);
    const ModelConfig& cfg = ck.config;
    const int64_t C = cfg.in_chans, S = cfg.img_size, K = cfg.num_classes;
    ck.model->plan(1, Mode::infer);
    std::vector<float> input(C * S * S), probs(K);
    for (const std::string& path : args->images) {
      const std::vector<float> pixels = img::load_image(path, int(C), int(S), int(S));
      data::normalize_image(input.data(), pixels.data(), int(C), int(S), ck.norm);
      const float* logits = ck.model->forward(input.data(), 1);
      const int32_t dummy = 0;
      cross_entropy_forward(probs.data(), logits, &dummy, 1, K, 0.f);
      std::vector<int> idx(K);
      std::iota(idx.begin(), idx.end(), 0);
      const int top = std::clamp<int>(args->top, 1, int(K));
      std::partial_sort(idx.begin(), idx.begin() + top, idx.end(),
                        [&](int a, int b) { return probs[a] > probs[b]; });
      std::printf("%s:", path.c_str());
      for (int i = 0; i < top; ++i) {
        const int k = idx[i];
        const std::string name = k < int(ck.class_names.size()) ? ck.class_names[k] : "class " + std::to_string(k);
        std::printf("%s %s %.4f", i ? "," : "", name.c_str(), probs[k]);
      }
      std::printf("\n");
    }
  });
}

}  // namespace gmlp::cli
