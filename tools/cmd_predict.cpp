// gmlp predict: the top classes of PNG/JPEG images under a checkpoint, through the library's
// public Classifier (include/gmlp/classifier.h).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <stdexcept>

#include "commands.h"
#include "core/threads.h"
#include "gmlp/classifier.h"
#include "io/image.h"

namespace gmlp::cli {

namespace {
constexpr size_t kGroup = 64;  // images a forward pass: the Classifier's batch
}

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
    // The images go through in groups of one forward pass: decoded in parallel, then classified
    // together, and printed in the order given. As sha256sum does, a file that cannot be read or
    // decoded is reported on stderr and the rest are still classified; stdout gets whole lines
    // only; the exit status says if any failed.
    const int C = model.channels(), S = model.image_size(), K = model.num_classes();
    const size_t image = size_t(C) * S * S;
    std::vector<float> pixels(kGroup * image);
    std::vector<std::string> errors(kGroup);
    std::exception_ptr bug;
    int failed = 0;
    for (size_t first = 0; first < args->images.size(); first += kGroup) {
      const int n = int(std::min(kGroup, args->images.size() - first));
#pragma omp parallel for schedule(dynamic)
      for (int i = 0; i < n; ++i) {
        errors[size_t(i)].clear();
        try {
          const std::vector<float> one = img::load_image(args->images[first + size_t(i)], C, S, S);
          std::copy(one.begin(), one.end(), pixels.begin() + ptrdiff_t(size_t(i) * image));
        } catch (const std::runtime_error& e) {
          errors[size_t(i)] = e.what();
          std::fill_n(pixels.begin() + ptrdiff_t(size_t(i) * image), image, 0.f);  // classified, not printed
        } catch (...) {  // a failed internal check: out of the parallel loop, then as anywhere else
#pragma omp critical(gmlp_predict_bug)
          if (!bug) bug = std::current_exception();
        }
      }
      if (bug) std::rethrow_exception(bug);
      const std::vector<float> logits = model.logits(pixels.data(), n);
      for (int i = 0; i < n; ++i) {
        if (!errors[size_t(i)].empty()) {
          std::fprintf(stderr, "gmlp: error: %s\n", errors[size_t(i)].c_str());
          ++failed;
          continue;
        }
        std::string line = args->images[first + size_t(i)] + ":";
        const char* sep = "";
        for (const Prediction& p : model.top_classes(logits.data() + size_t(i) * K, args->top)) {
          char probability[32];
          std::snprintf(probability, sizeof probability, " %.4f", p.probability);
          line.append(sep).append(" ").append(p.name).append(probability);
          sep = ",";
        }
        std::printf("%s\n", line.c_str());
      }
    }
    if (failed) throw Reported{};  // exit status 1, the errors already on stderr
  });
}

}  // namespace gmlp::cli
