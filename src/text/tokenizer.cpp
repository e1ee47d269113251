// SentencePiece 0.1.97 (github.com/google/sentencepiece): training through
// SentencePieceTrainer::Train with a key/value spec and a SentenceIterator over the caller's
// lines, the model returned as bytes (so nothing is written behind our back) and saved with
// write_file_atomic; loading through LoadFromSerializedProto after our own whole-file read.
#include "text/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <unordered_map>

#include "core/error.h"
#include "io/atomic_file.h"

namespace gmlp::text {

namespace {

constexpr size_t kMaxModelBytes = size_t{1} << 30;

// One line: SentencePiece's status messages may hold newlines.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

// Feeds the non-empty lines to the trainer without copying them.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::vector<std::string>& lines) : lines_(lines) { skip(); }
  bool done() const override { return i_ >= lines_.size(); }
  void Next() override {
    ++i_;
    skip();
  }
  const std::string& value() const override { return lines_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void skip() {
    while (i_ < lines_.size() && lines_[i_].empty()) ++i_;
  }
  const std::vector<std::string>& lines_;
  size_t i_ = 0;
};

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp)
    : sp_(std::move(sp)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::train(const std::vector<std::string>& lines, const std::string& model_prefix,
                           int vocab_size, uint64_t seed) {
  const std::string what = cat("failed to train a tokenizer for '", model_prefix, ".model'");
  size_t nonempty = 0;
  for (const std::string& l : lines) nonempty += !l.empty();
  if (nonempty == 0) fail(what, ": expected training text, found no non-empty line");
  if (vocab_size <= kNumReserved || vocab_size > 1'000'000)
    fail(what, ": expected a vocabulary size in ", kNumReserved + 1, "..1000000, found ",
         vocab_size);

  // No model_prefix: with the model returned as bytes SentencePiece writes no file itself.
  const std::unordered_map<std::string, std::string> spec = {
      {"model_type", "unigram"},
      {"vocab_size", std::to_string(vocab_size)},
      {"pad_id", "0"},
      {"unk_id", "1"},
      {"bos_id", "-1"},
      {"eos_id", "-1"},
      {"pad_piece", kReservedPieces[kPad]},
      {"unk_piece", kReservedPieces[kUnk]},
      {"control_symbols", "[CLS],[SEP],[MASK]"},  // ids 2, 3, 4: placed after pad and unk
      {"character_coverage", "1.0"},
      {"input_sentence_size", "0"},  // every line, no sampling
      {"shuffle_input_sentence", "false"},
      {"num_threads", "1"},
      {"max_sentence_length", "1048576"},  // bytes; longer lines are left out of training
      {"minloglevel", "2"},                // errors only: no progress log on stderr
  };
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned>(seed ^ (seed >> 32)));
  LineIterator it(lines);
  std::string bytes;
  const auto status = sentencepiece::SentencePieceTrainer::Train(spec, &it, &bytes);
  if (!status.ok()) fail(what, ": SentencePiece: ", one_line(status.ToString()));

  Tokenizer tok = from_serialized(bytes, cat("the model trained for '", model_prefix, ".model'"));
  std::string vocab;
  for (int i = 0; i < tok.vocab_size(); ++i)
    vocab += cat(tok.sp_->IdToPiece(i), '\t', tok.sp_->GetScore(i), '\n');
  write_file_atomic(model_prefix + ".model", bytes);
  write_file_atomic(model_prefix + ".vocab", vocab);
  return tok;
}

Tokenizer Tokenizer::load(const std::string& model_path) {
  return from_serialized(read_file(model_path, kMaxModelBytes), cat("'", model_path, "'"));
}

Tokenizer Tokenizer::from_serialized(std::string_view bytes, const std::string& source) {
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  if (bytes.empty())
    fail("failed to load the tokenizer ", source,
         ": expected a SentencePiece model, found no data");
  const auto status = sp->LoadFromSerializedProto(bytes);
  if (!status.ok())
    fail("failed to load the tokenizer ", source, ": expected a SentencePiece model (",
         one_line(status.ToString()), ")");
  const int n = sp->GetPieceSize();
  if (n <= kNumReserved)
    fail("failed to load the tokenizer ", source, ": expected more than ", kNumReserved,
         " pieces, found ", n);
  for (int i = 0; i < kNumReserved; ++i)
    if (sp->IdToPiece(i) != kReservedPieces[i] || (i == kUnk) != sp->IsUnknown(i) ||
        (i != kUnk && !sp->IsControl(i)))
      fail("failed to load the tokenizer ", source, ": expected the reserved symbol ",
           kReservedPieces[i], " at id ", i, ", found '", sp->IdToPiece(i),
           "' (was it trained by gmlp?)");
  return Tokenizer(std::move(sp));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  if (!status.ok()) fail("failed to tokenize a text: SentencePiece: ", one_line(status.ToString()));
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  const int n = vocab_size();
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= n)
      fail("failed to decode token ids: id ", ids[i], " at position ", i,
           " is outside the vocabulary of ", n);
  std::string text;
  const auto status = sp_->Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  if (!status.ok())
    fail("failed to decode token ids: SentencePiece: ", one_line(status.ToString()));
  return text;
}

std::string Tokenizer::id_to_piece(int32_t id) const {
  if (id < 0 || id >= vocab_size())
    fail("token id ", id, " is outside the vocabulary of ", vocab_size());
  return sp_->IdToPiece(id);
}

int32_t Tokenizer::piece_to_id(std::string_view piece) const { return sp_->PieceToId(piece); }

int Tokenizer::vocab_size() const { return sp_->GetPieceSize(); }

std::string Tokenizer::serialized() const { return sp_->serialized_model_proto(); }

}  // namespace gmlp::text
