// gmlp as a library: load a trained checkpoint (gmlp's, or a timm state_dict of gMLP, Mixer,
// ResMLP or ViT saved as safetensors) and classify images from C++, with no other header of this
// project and no Python.
//
//   gmlp::Classifier model("runs/demo/checkpoint.safetensors");
//   for (const gmlp::Prediction& p : model.classify("boot.png", 3))
//     std::printf("%s %.3f\n", p.name.c_str(), p.probability);
//
// Link with the CMake target gmlp::gmlp. Failures (a missing or corrupt file, a checkpoint that
// is not a valid model) throw std::runtime_error with a one-line message naming the file; a
// failed internal check, a bug in gmlp rather than in what it was given, throws std::logic_error. A
// Classifier keeps its working memory between calls: use one per thread. Its own work runs on
// set_threads() threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace gmlp {

struct Prediction {
  int label;          // class id, 0 .. num_classes() - 1
  std::string name;   // the class name stored in the checkpoint, or "class <label>"
  float probability;  // softmax of the logits
};

class Classifier {
 public:
  explicit Classifier(const std::string& checkpoint);
  // The same model run at another image size (same patch size): what is tied to its patch grid
  // (gMLP's and ResMLP's spatial weights, ViT's positions) is resampled for images resized to
  // image_size, and notes() says so. Mixer, the feed-forward-only model and EAMLP cannot change
  // size and throw.
  Classifier(const std::string& checkpoint, int image_size);
  ~Classifier();
  Classifier(Classifier&&) noexcept;
  Classifier& operator=(Classifier&&) noexcept;

  // The input the model takes: channels × image_size × image_size pixels.
  int channels() const;
  int image_size() const;
  int num_classes() const;
  // The checkpoint's class names; empty when it stores none (a timm file).
  const std::vector<std::string>& class_names() const;
  // What reading the checkpoint had to assume or change, one sentence each (a timm ViT's heads,
  // which its tensors do not hold; a change of image size); empty for gmlp's own checkpoints
  // run at their own size.
  const std::vector<std::string>& notes() const;

  // Logits of n images given as (n, channels, size, size) floats in [0, 1], row-major; the
  // checkpoint's normalisation is applied here, as in training. Returns (n, num_classes).
  std::vector<float> logits(const float* pixels, int n);
  // The `top` most probable classes of one image of (channels, size, size) pixels in [0, 1],
  // most probable first.
  std::vector<Prediction> classify(const float* pixels, int top = 5);
  // The same for a PNG or JPEG file, converted to the model's channels (gray as luma, or RGB)
  // and resized to its input size.
  std::vector<Prediction> classify(const std::string& image_file, int top = 5);
  // The `top` most probable classes (softmax) of one row of num_classes() logits, most probable
  // first: what classify() makes of logits().
  std::vector<Prediction> top_classes(const float* logits, int top = 5) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Threads for everything parallel in this process (OpenMP and oneDNN), whichever of the
// application's threads calls a Classifier, TextClassifier or FillMask; n <= 0: every core the
// process may use (its CPUs, or its cgroup's CPU quota where that is less). Where it is never
// called: OMP_NUM_THREADS where that is set, else every core the process may use. Serving from W
// threads of their own, one model each, set_threads(cores / W) keeps W teams from sharing the
// cores. At most the OpenMP runtime's thread limit (OMP_THREAD_LIMIT); more than 1024 throws
// std::runtime_error.
void set_threads(int n);

}  // namespace gmlp
