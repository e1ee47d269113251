// libFuzzer harness: the SentencePiece tokenizer (src/text/tokenizer.h). One input holds a model
// and a text, split at fuzz::kSplit. A non-empty model part is loaded with from_serialized (the
// bytes a text checkpoint embeds, or a .model file's); an empty one selects a small model
// trained once at start-up. The text is encoded and decoded, looked up as a piece, and its bytes
// are also decoded as token ids (an error when one is out of range).
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "fuzz.h"
#include "text/tokenizer.h"

using namespace gmlp;
namespace fs = std::filesystem;

namespace {

const text::Tokenizer& trained() {
  static const text::Tokenizer tok = [] {
    const fs::path dir = fs::temp_directory_path() / cat("gmlp_fuzz_tokenizer_", getpid());
    fs::create_directories(dir);
    const std::vector<std::string> lines = {
        "In the beginning God created the heaven and the earth.",
        "And the earth was without form, and void; and darkness was upon the face of the deep.",
        "Grüße aus Zürich, naïve café, 東京, Ελληνικά, emoji \xf0\x9f\x99\x82 and tabs\tinside.",
        "[MASK] [CLS] [SEP] are ordinary characters in a text: 0123456789 +-*/=<>()[]{}",
    };
    text::Tokenizer t = text::Tokenizer::train(lines, (dir / "tok").string(), 60, 1);
    fs::remove_all(dir);
    return t;
  }();
  return tok;
}

void exercise(const text::Tokenizer& tok, std::string_view text) {
  const std::vector<int32_t> ids = tok.encode(text);
  for (int32_t id : ids)
    if (id < 0 || id >= tok.vocab_size() || (id < text::Tokenizer::kNumReserved && id != text::Tokenizer::kUnk)) {
      std::fprintf(stderr, "gmlp fuzz: encode returned id %d of %d\n", id, tok.vocab_size());
      std::abort();
    }
  tok.decode(ids);
  tok.piece_to_id(text);
  if (!ids.empty()) tok.id_to_piece(ids.back());
  std::vector<int32_t> raw(text.size() / 4);
  if (!raw.empty()) std::memcpy(raw.data(), text.data(), raw.size() * 4);
  fuzz::run([&] { tok.decode(raw); });
  fuzz::run([&] { tok.id_to_piece(raw.empty() ? -1 : raw[0]); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view parts[2];
  fuzz::split(fuzz::as_view(data, size), parts);
  fuzz::run([&] {
    if (parts[0].empty()) return exercise(trained(), parts[1]);
    const text::Tokenizer tok = text::Tokenizer::from_serialized(parts[0], "fuzz.model");
    tok.serialized();
    exercise(tok, parts[1]);
  });
  return 0;
}
