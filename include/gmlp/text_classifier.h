// gmlp as a library: classify texts with a finetuned text model (a checkpoint of gmlp finetune),
// as Hugging Face's text-classification pipeline does, from C++.
//
//   gmlp::TextClassifier model("runs/genre/checkpoint.safetensors");
//   for (const gmlp::Prediction& p : model.classify("Blessed are the meek", 3))
//     std::printf("%s %.3f\n", p.name.c_str(), p.probability);
//
// Link with the CMake target gmlp::gmlp. Errors are those of classifier.h: std::runtime_error with
// a one-line message for a bad file, std::logic_error for a failed internal check. A
// TextClassifier keeps its working memory between calls: use one per thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gmlp/classifier.h"

namespace gmlp {

class TextClassifier {
 public:
  explicit TextClassifier(const std::string& checkpoint);
  ~TextClassifier();
  TextClassifier(TextClassifier&&) noexcept;
  TextClassifier& operator=(TextClassifier&&) noexcept;

  int num_classes() const;
  // The class names the checkpoint stores (its finetuning task's).
  const std::vector<std::string>& class_names() const;
  // Whether the model was finetuned on pairs of texts ("[CLS] a [SEP] b [SEP]"), the task it
  // was finetuned on, and the most tokens it reads.
  bool takes_pairs() const;
  const std::string& task() const;
  int max_tokens() const;
  // Logits (n, num_classes) of n texts, or of n pairs when text_pairs is given (as many as
  // texts). Each is tokenized and cut to max_tokens() as finetuning does (a pair loses tokens
  // from the end of its longer text first).
  std::vector<float> logits(const std::vector<std::string>& texts, const std::vector<std::string>& text_pairs = {});
  // The model's input for one text (or pair), as logits() builds it: "[CLS] text [SEP]" (or
  // "[CLS] text [SEP] pair [SEP]"), cut to max_tokens(), not padded.
  std::vector<int32_t> tokens(const std::string& text, const std::string& text_pair = "") const;
  // Logits (n, num_classes) of n sequences of token ids given as (n, max_tokens()), each padded
  // with [PAD] (id 0) as tokens() leaves it to be; an id outside the vocabulary throws.
  std::vector<float> logits(const int32_t* ids, int n);
  int vocab_size() const;
  // The `top` most probable classes (softmax) of one row of num_classes() logits, most probable
  // first: what classify() makes of logits().
  std::vector<Prediction> top_classes(const float* logits, int top = 5) const;
  // The `top` most probable classes of each text (or pair), most probable first.
  std::vector<std::vector<Prediction>> classify(const std::vector<std::string>& texts, int top = 5,
                                                const std::vector<std::string>& text_pairs = {});
  // The same for one text (or pair).
  std::vector<Prediction> classify(const std::string& text, int top = 5, const std::string& text_pair = "");

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gmlp
