// gmlp predict: the top classes of PNG/JPEG images under a checkpoint, through the library's
// public Classifier (include/gmlp/classifier.h).
#include <cstdio>
#include <stdexcept>

#include "commands.h"
#include "core/threads.h"
#include "gmlp/classifier.h"

namespace gmlp::cli {

void add_predict(CLI::App& app) {
  struct Args {
    std::string checkpoint;
    std::vector<std::string> images;
    int top = 3, threads = 0, img_size = 0;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("predict", "Classify PNG/JPEG images with an image classifier checkpoint");
  sub->add_option(
         "--checkpoint", args->checkpoint,
         "An image classifier checkpoint (.safetensors: gmlp train's, or a timm state_dict: gMLP, Mixer, ResMLP, ViT)")
      ->required();
  sub->add_option("images", args->images, "Image files (resized and converted to the model's input)")->required();
  sub->add_option("--top", args->top, "Classes to print per image")->check(at_least(1))->capture_default_str();
  add_img_size_option(*sub, args->img_size);
  add_threads_option(*sub, args->threads);
  sub->callback([args] {
    set_threads(args->threads);
    Classifier model(args->checkpoint, args->img_size);
    print_notes(model.notes());
    // As sha256sum does: a file that cannot be read or decoded is reported on stderr and the
    // rest are still classified; stdout gets whole lines only; the exit status says if any failed.
    int failed = 0;
    for (const std::string& path : args->images) {
      std::string line = path + ":";
      try {
        const char* sep = "";
        for (const Prediction& p : model.classify(path, args->top)) {
          char probability[32];
          std::snprintf(probability, sizeof probability, " %.4f", p.probability);
          line.append(sep).append(" ").append(p.name).append(probability);
          sep = ",";
        }
      } catch (const std::runtime_error& e) {
        std::fprintf(stderr, "gmlp: error: %s\n", e.what());
        ++failed;
        continue;
      }
      std::printf("%s\n", line.c_str());
    }
    if (failed) throw Reported{};  // exit status 1, the errors already on stderr
  });
}

}  // namespace gmlp::cli
