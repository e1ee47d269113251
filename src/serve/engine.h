// The model behind gmlp serve: a checkpoint loaded through the public API (an image Classifier,
// a masked-language model's FillMask or a finetuned TextClassifier) and the one function the
// inference thread calls on a batch of jobs. The const members only read the checkpoint (its
// shapes, tokenizer and class names): HTTP threads call them to validate and to shape answers
// while the inference thread runs the model.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gmlp/classifier.h"
#include "gmlp/fill_mask.h"
#include "gmlp/text_classifier.h"
#include "serve/batcher.h"
#include "serve/protocol.h"

namespace gmlp::serve {

class Engine {
 public:
  // Loads the checkpoint (gmlp::Error naming the file if it is none of the three kinds); the
  // model is named `name`, or after the file when empty.
  Engine(const std::string& checkpoint, const std::string& name);

  const ModelSpec& spec() const { return spec_; }
  // What reading a timm file assumed (Classifier::notes).
  std::vector<std::string> notes() const;

  // Runs jobs of one Op together where the model allows (images and a classifier's sequences in
  // one forward pass; a masked-language model's one sequence at a time), writing each job's
  // answer or its error.
  void run(const std::vector<Job*>& jobs);

  // An image request's body as the model's input (channels, size, size) in [0, 1]: decoded by
  // the hardened decoders, converted and resized as predict does. RequestError 400 if it is not
  // an image they read.
  std::vector<float> image_input(const std::string& bytes) const;
  // The top classes of one row of logits, as JSON {"index", "label", "probability"}.
  nlohmann::json top_classes(const float* logits, int top) const;
  // Checks texts for /v1/fill-mask and /v1/classify-text (RequestError 400 for a text the model
  // cannot take), and the token ids of one, as the model reads it (/v1/tokenize).
  void check_texts(const TextRequest& request, Job::Op op) const;
  std::vector<int32_t> tokens(const std::string& text, const std::string& pair) const;

 private:
  void run_one(Job& job);

  ModelSpec spec_;
  std::unique_ptr<Classifier> image_;
  std::unique_ptr<FillMask> mlm_;
  std::unique_ptr<TextClassifier> classifier_;
};

}  // namespace gmlp::serve
