// gmlp as a library: fill in the [MASK]s of a text with a masked-language model (a checkpoint of
// gmlp pretrain), as Hugging Face's fill-mask pipeline does, from C++.
//
//   gmlp::FillMask model("runs/pretrain-gmlp/checkpoint.safetensors");
//   for (const gmlp::MaskFill& f : model.fill("And God said, Let there be [MASK].")[0])
//     std::printf("%s %.3f  %s\n", f.token_str.c_str(), f.score, f.sequence.c_str());
//
// Link with the CMake target gmlp::gmlp. Errors are those of classifier.h: std::runtime_error with
// a one-line message for a bad file or text, std::logic_error for a failed internal check. A
// FillMask keeps its working memory between calls: use one per thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace gmlp {

struct MaskFill {
  int token;              // the token's id in the checkpoint's vocabulary
  std::string token_str;  // the token as text: its piece without SentencePiece's word-start mark
  float score;            // its softmax probability at this mask, over the whole vocabulary
  std::string sequence;   // the text with this mask filled in by token_str (any other [MASK] kept)
};

class FillMask {
 public:
  explicit FillMask(const std::string& checkpoint);
  ~FillMask();
  FillMask(FillMask&&) noexcept;
  FillMask& operator=(FillMask&&) noexcept;

  // The most tokens the model reads in one text, [CLS] and [SEP] included.
  int max_tokens() const;
  // Throws std::runtime_error, naming the text, for one with no [MASK] or longer than
  // max_tokens() (each [MASK] is one token): what fill() would refuse, without running the model.
  void check(const std::string& text) const;
  int vocab_size() const;
  // The model's input for `text`, as fill() builds it: "[CLS] ... [MASK] ... [SEP]", not padded.
  // Throws as check() does.
  std::vector<int32_t> tokens(const std::string& text) const;
  // The vocabulary logits (n, vocab_size()) at each of the n positions of one sequence of token
  // ids (1 <= n <= max_tokens(), padded with [PAD], id 0, to max_tokens() as fill() pads its
  // input); an id outside the vocabulary throws.
  std::vector<float> logits(const int32_t* ids, int n);
  // For each [MASK] of `text`, in order, its `top` most probable tokens, most probable first.
  // Throws as check() does.
  std::vector<std::vector<MaskFill>> fill(const std::string& text, int top = 5);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gmlp
