// SentencePiece 0.1.97 (github.com/google/sentencepiece): training through
// SentencePieceTrainer::Train with a key/value spec and a SentenceIterator over the caller's
// lines, the model returned as bytes (so nothing is written behind our back) and saved with
// write_file_atomic; loading through LoadFromSerializedProto after our own whole-file read, then
// a check of the normalizers' character maps, which SentencePiece trusts (see check_charsmap).
#include "text/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstring>
#include <unordered_map>

#include "core/error.h"
#include "io/atomic_file.h"

namespace gmlp::text {

namespace {

constexpr size_t kMaxModelBytes = size_t{1} << 30;
constexpr size_t kEncodeChunk = size_t{1} << 16;

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

// --- the normalizers' character maps ----------------------------------------------------------
// A model's NormalizerSpec (and DenormalizerSpec) may carry precompiled_charsmap: a 4-byte
// little-endian trie size, a darts-clone double-array trie of that many bytes (32-bit units),
// then NUL-terminated replacement strings that the trie's leaves index (SentencePiece's
// normalizer.cc, DecodePrecompiledCharsMap and NormalizePrefix). SentencePiece checks only the
// trie size: it walks the trie over the text to encode without bounds checks and reads the
// replacement at whatever offset a leaf holds, so a corrupt map reads outside the model. Every
// unit a text can reach is checked here instead, before the model is used.

// Calls f(field, wire type, payload) for each field of a protobuf message (payload: the bytes of
// a length-delimited field, empty otherwise); false if the message is malformed or uses groups.
template <class F>
bool proto_fields(std::string_view msg, F f) {
  size_t pos = 0;
  const auto varint = [&](uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64 && pos < msg.size(); shift += 7) {
      const auto b = uint8_t(msg[pos++]);
      *v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  };
  while (pos < msg.size()) {
    uint64_t key = 0, v = 0;
    if (!varint(&key)) return false;
    std::string_view payload;
    switch (key & 7) {
      case 0:
        if (!varint(&v)) return false;
        break;
      case 1:
        if (msg.size() - pos < 8) return false;
        pos += 8;
        break;
      case 5:
        if (msg.size() - pos < 4) return false;
        pos += 4;
        break;
      case 2:
        if (!varint(&v) || v > msg.size() - pos) return false;
        payload = msg.substr(pos, v);
        pos += v;
        break;
      default: return false;
    }
    f(key >> 3, key & 7, payload);
  }
  return true;
}

// Empty if the character map is safe to use, else what is wrong with it.
// The longest replacement a character map may hold.
constexpr size_t kMaxReplacementBytes = 256;

std::string check_charsmap(std::string_view map) {
  if (map.empty()) return "";  // no normalization rules
  // SentencePiece refuses these two at load already; here they bound the reads below.
  uint32_t trie_bytes = 0;
  if (map.size() <= 4) return cat("is ", map.size(), " bytes, too short for its header");
  std::memcpy(&trie_bytes, map.data(), 4);
  if (trie_bytes >= map.size() - 4)
    return cat("declares a ", trie_bytes, "-byte trie but holds ", map.size() - 4, " bytes after its header");
  const size_t n = trie_bytes / 4;  // units
  const std::string_view strings = map.substr(4 + size_t(trie_bytes));
  if (n == 0) return "has an empty trie";
  const auto unit = [&](size_t i) {
    uint32_t u;
    std::memcpy(&u, map.data() + 4 + 4 * i, 4);
    return u;
  };
  // darts-clone's unit: has_leaf bit 8, label bits 0-7 and 31 (set on leaves), offset above.
  const auto offset = [](uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); };
  const auto label = [](uint32_t u) { return u & ((1u << 31) | 0xff); };
  // Over the trie's states (the position a state's children are found from), each once.
  std::vector<bool> seen(n);
  std::vector<size_t> todo;
  const auto reach = [&](size_t base) {
    if (base < n && seen[base]) return;
    if (base < n) seen[base] = true;
    todo.push_back(base);
  };
  reach(offset(unit(0)));
  while (!todo.empty()) {
    const size_t base = todo.back();
    todo.pop_back();
    for (size_t c = 0; c < 256; ++c) {  // every byte a text may hold next
      const size_t at = base ^ c;
      if (at >= n) return cat("has a trie that leads to unit ", at, " of ", n);
      const uint32_t u = unit(at);
      if (label(u) != c) continue;
      const size_t next = at ^ offset(u);
      if (u >> 8 & 1) {  // a leaf below: the replacement's offset
        if (next >= n) return cat("has a trie that leads to unit ", next, " of ", n);
        const uint32_t value = unit(next) & ((1u << 31) - 1);
        if (value >= strings.size())
          return cat("has a replacement at byte ", value, " of its ", strings.size(), "-byte strings");
        // SentencePiece reads the replacement up to its NUL; and since each replaces at least one
        // byte of the text, its length bounds how much normalizing can grow a text (NFKC's
        // longest, U+FDFA's, is 33 bytes).
        const size_t end = strings.find('\0', value);
        if (end == std::string_view::npos)
          return cat("has a replacement at byte ", value, " that runs past the end of its strings");
        if (end - value > kMaxReplacementBytes)
          return cat("has a replacement of ", end - value, " bytes at byte ", value, ", more than ",
                     kMaxReplacementBytes);
      }
      reach(next);
    }
  }
  return "";
}

// Fails unless both normalizers' character maps in a model proto (as SentencePiece serializes
// it: each field once) pass check_charsmap. ModelProto: normalizer_spec = 3,
// denormalizer_spec = 5; NormalizerSpec: precompiled_charsmap = 2.
void check_normalizers(std::string_view model, const std::string& source) {
  std::string problem;
  bool specs_parsed = true;
  const bool parsed = proto_fields(model, [&](uint64_t field, uint64_t wire, std::string_view spec) {
    if ((field != 3 && field != 5) || wire != 2 || !problem.empty()) return;
    std::string_view map;
    specs_parsed &= proto_fields(spec, [&](uint64_t f, uint64_t w, std::string_view v) {
      if (f == 2 && w == 2) map = v;
    });
    if (const std::string p = check_charsmap(map); !p.empty())
      problem = cat("the ", field == 3 ? "normalizer" : "denormalizer", "'s character map ", p);
  });
  if (!parsed || !specs_parsed) problem = "its protobuf message cannot be read back";
  if (!problem.empty())
    fail("failed to load the tokenizer ", source,
         ": expected a SentencePiece model whose normalization "
         "rules are intact, found one where ",
         problem);
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp) : sp_(std::move(sp)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::train(const std::vector<std::string>& lines, const std::string& model_prefix, int vocab_size,
                           uint64_t seed) {
  const std::string what = cat("failed to train a tokenizer for '", model_prefix, ".model'");
  size_t nonempty = 0;
  for (const std::string& l : lines) nonempty += !l.empty();
  if (nonempty == 0) fail(what, ": expected training text, found no non-empty line");
  if (vocab_size <= kNumReserved || vocab_size > 1'000'000)
    fail(what, ": expected a vocabulary size in ", kNumReserved + 1, "..1000000, found ", vocab_size);

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
  for (int i = 0; i < tok.vocab_size(); ++i) vocab += cat(tok.sp_->IdToPiece(i), '\t', tok.sp_->GetScore(i), '\n');
  write_file_atomic(model_prefix + ".model", bytes);
  write_file_atomic(model_prefix + ".vocab", vocab);
  return tok;
}

Tokenizer Tokenizer::load(const std::string& model_path) {
  return from_serialized(read_file(model_path, kMaxModelBytes), cat("'", model_path, "'"));
}

Tokenizer Tokenizer::from_serialized(std::string_view bytes, const std::string& source) {
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  if (bytes.empty()) fail("failed to load the tokenizer ", source, ": expected a SentencePiece model, found no data");
  const auto status = sp->LoadFromSerializedProto(bytes);
  if (!status.ok())
    fail("failed to load the tokenizer ", source, ": expected a SentencePiece model (", one_line(status.ToString()),
         ")");
  check_normalizers(sp->serialized_model_proto(), source);
  const int n = sp->GetPieceSize();
  if (n <= kNumReserved)
    fail("failed to load the tokenizer ", source, ": expected more than ", kNumReserved, " pieces, found ", n);
  for (int i = 0; i < kNumReserved; ++i)
    if (sp->IdToPiece(i) != kReservedPieces[i] || (i == kUnk) != sp->IsUnknown(i) || (i != kUnk && !sp->IsControl(i)))
      fail("failed to load the tokenizer ", source, ": expected the reserved symbol ", kReservedPieces[i], " at id ", i,
           ", found ", shown(sp->IdToPiece(i)), " (was it trained by gmlp?)");
  return Tokenizer(std::move(sp));
}

namespace {

// Where a text longer than kEncodeChunk bytes is cut: after the last space within the chunk, or,
// in a chunk without one, at the last UTF-8 character boundary.
size_t chunk_end(std::string_view text) {
  if (text.size() <= kEncodeChunk) return text.size();
  const size_t space = text.rfind(' ', kEncodeChunk - 1);
  if (space != std::string_view::npos && space > 0) return space + 1;
  size_t end = kEncodeChunk;
  while (end > 1 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return end;
}

}  // namespace

// SentencePiece builds a lattice over the whole text it is given, so a long line is encoded a
// chunk at a time: pieces never cross a space (split_by_whitespace), so cutting after one gives
// the same ids as the whole text would, in memory bounded by the chunk.
std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  std::vector<int> ids;
  while (!text.empty()) {
    const size_t end = chunk_end(text);
    const auto status = sp_->Encode(text.substr(0, end), &ids);
    if (!status.ok()) fail("failed to tokenize a text: SentencePiece: ", one_line(status.ToString()));
    out.insert(out.end(), ids.begin(), ids.end());
    text.remove_prefix(end);
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  const int n = vocab_size();
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= n)
      fail("failed to decode token ids: id ", ids[i], " at position ", i, " is outside the vocabulary of ", n);
  std::string text;
  const auto status = sp_->Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  if (!status.ok()) fail("failed to decode token ids: SentencePiece: ", one_line(status.ToString()));
  return text;
}

std::string Tokenizer::id_to_piece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) fail("token id ", id, " is outside the vocabulary of ", vocab_size());
  return sp_->IdToPiece(id);
}

int32_t Tokenizer::piece_to_id(std::string_view piece) const { return sp_->PieceToId(piece); }

int Tokenizer::vocab_size() const { return sp_->GetPieceSize(); }

std::string Tokenizer::serialized() const { return sp_->serialized_model_proto(); }

}  // namespace gmlp::text
