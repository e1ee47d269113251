// A SentencePiece (unigram) tokenizer with BERT's reserved symbols at fixed ids:
// [PAD] = 0, [UNK] = 1, [CLS] = 2, [SEP] = 3, [MASK] = 4, then the learned pieces.
// [CLS], [SEP] and [MASK] are control symbols: encode() never produces them from text (the
// string "[MASK]" in a text is tokenized as ordinary characters) and decode() drops them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace gmlp::text {

class Tokenizer {
 public:
  static constexpr int32_t kPad = 0, kUnk = 1, kCls = 2, kSep = 3, kMask = 4;
  static constexpr int32_t kNumReserved = 5;  // ids below this are the reserved symbols
  static constexpr const char* kReservedPieces[kNumReserved] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

  // Trains a unigram model on `lines` (one sentence or document each; empty lines are skipped)
  // and writes it to model_prefix + ".model" (the model proto, atomically) and model_prefix +
  // ".vocab" (one "piece<TAB>score" a line, for people). Deterministic: the same lines, size
  // and seed give the same model bytes (one thread, every line used, no shuffling, character
  // coverage 1.0 so every character of the training text is in the vocabulary). Throws a
  // one-line gmlp::Error if there is no text, vocab_size is out of range or too large for the
  // text, or SentencePiece fails.
  static Tokenizer train(const std::vector<std::string>& lines, const std::string& model_prefix, int vocab_size = 8000,
                         uint64_t seed = 0);

  // Loads a model file written by train(). Throws a one-line gmlp::Error naming the file if it
  // is missing, not a SentencePiece model, or lacks the reserved symbols at ids 0..4.
  static Tokenizer load(const std::string& model_path);
  // The same from the bytes serialized() returns; `source` names them in errors.
  static Tokenizer from_serialized(std::string_view bytes, const std::string& source);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Token ids of `text` (never a reserved id other than [UNK]). A long text is encoded 64 KiB at
  // a time, cut after a space, which gives the ids of the whole text in bounded memory (a run of
  // 64 KiB without a space is cut between two characters).
  std::vector<int32_t> encode(std::string_view text) const;
  // The text of `ids`; reserved ids other than [UNK] are dropped. Throws on an id out of range.
  std::string decode(const std::vector<int32_t>& ids) const;
  // The piece of id (throws if out of range) / the id of piece ([UNK]'s id if unknown).
  std::string id_to_piece(int32_t id) const;
  int32_t piece_to_id(std::string_view piece) const;
  int vocab_size() const;
  // The model proto's bytes (what the .model file holds), to embed in a checkpoint.
  std::string serialized() const;

 private:
  explicit Tokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp);
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace gmlp::text
