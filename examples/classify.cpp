// The smallest program on gmlp's public API: classify image files with a trained checkpoint.
//   build/classify runs/demo/checkpoint.safetensors boot.png [more.png ...]
// It includes nothing of gmlp but <gmlp/classifier.h> and links the gmlp::gmlp target.
#include <gmlp/classifier.h>

#include <cstdio>
#include <stdexcept>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s CHECKPOINT IMAGE...\n", argv[0]);
    return 2;
  }
  try {
    gmlp::Classifier model(argv[1]);
    for (int i = 2; i < argc; ++i) {
      const gmlp::Prediction best = model.classify(argv[i], 1).front();
      std::printf("%s: %s (%.1f %%)\n", argv[i], best.name.c_str(), 100.0 * best.probability);
    }
  } catch (const std::runtime_error& e) {
    std::fprintf(stderr, "classify: %s\n", e.what());
    return 1;
  }
  return 0;
}
