// The public FillMask (include/gmlp/fill_mask.h) over the engine: a text checkpoint's encoder and
// masked-token head under an inference memory plan, and its tokenizer.
#include "gmlp/fill_mask.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "core/error.h"
#include "core/threads.h"
#include "text/tokenizer.h"
#include "train/lm_trainer.h"

namespace gmlp {

namespace {

constexpr std::string_view kMaskText = "[MASK]";
constexpr std::string_view kWordStart = "\xe2\x96\x81";  // SentencePiece's "▁", U+2581

// The text between the masks: n masks make n + 1 parts.
std::vector<std::string> split_at_masks(const std::string& text) {
  std::vector<std::string> parts;
  size_t from = 0;
  for (size_t at; (at = text.find(kMaskText, from)) != std::string::npos; from = at + kMaskText.size())
    parts.push_back(text.substr(from, at - from));
  parts.push_back(text.substr(from));
  return parts;
}

// A piece as text: the word-start mark dropped at its front and a space elsewhere.
std::string piece_text(const std::string& piece, bool* starts_word) {
  *starts_word = piece.rfind(kWordStart, 0) == 0;
  std::string text;
  for (size_t from = *starts_word ? kWordStart.size() : 0;;) {
    const size_t at = piece.find(kWordStart, from);
    text.append(piece, from, at == std::string::npos ? std::string::npos : at - from);
    if (at == std::string::npos) return text;
    text += ' ';
    from = at + kWordStart.size();
  }
}

}  // namespace

struct FillMask::Impl {
  TextCheckpoint ck;

  // The model's input for `text`, split at its masks: [CLS] parts[0] [MASK] parts[1] ... [SEP],
  // padded to the model's length; positions gets where each [MASK] is. Throws for a text with
  // no [MASK] or longer than the model reads.
  std::vector<int32_t> input(const std::string& text, const std::vector<std::string>& parts,
                             std::vector<int64_t>* positions) const {
    if (parts.size() == 1) fail("no [MASK] to fill in '", text, "'");
    std::vector<int32_t> ids = {text::Tokenizer::kCls};
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i > 0) {
        if (positions) positions->push_back(int64_t(ids.size()));
        ids.push_back(text::Tokenizer::kMask);
      }
      for (int32_t id : ck.tokenizer->encode(parts[i])) ids.push_back(id);
    }
    ids.push_back(text::Tokenizer::kSep);
    const size_t N = size_t(ck.config.seq_len);
    if (ids.size() > N)
      fail("'", text, "' is ", ids.size(), " tokens with [CLS] and [SEP]; the model reads at most ", N);
    ids.resize(N, text::Tokenizer::kPad);
    return ids;
  }
};

FillMask::FillMask(const std::string& checkpoint) : impl_(std::make_unique<Impl>()) {
  use_process_threads();
  impl_->ck = load_text_checkpoint(checkpoint);
  impl_->ck.model->plan(1, Mode::infer);
  impl_->ck.model->freeze();
}
FillMask::~FillMask() = default;
FillMask::FillMask(FillMask&&) noexcept = default;
FillMask& FillMask::operator=(FillMask&&) noexcept = default;

int FillMask::max_tokens() const { return impl_->ck.config.seq_len; }

void FillMask::check(const std::string& text) const { impl_->input(text, split_at_masks(text), nullptr); }

int FillMask::vocab_size() const { return impl_->ck.config.vocab_size; }

std::vector<int32_t> FillMask::tokens(const std::string& text) const {
  std::vector<int32_t> ids = impl_->input(text, split_at_masks(text), nullptr);
  while (!ids.empty() && ids.back() == text::Tokenizer::kPad) ids.pop_back();
  return ids;
}

std::vector<float> FillMask::logits(const int32_t* ids, int n) {
  use_process_threads();
  const int N = max_tokens(), V = vocab_size();
  if (n < 1 || n > N) fail("failed to compute logits: ", n, " tokens (expected 1..", N, ")");
  std::vector<int32_t> input(size_t(N), text::Tokenizer::kPad);
  for (int i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= V)
      fail("failed to compute logits: token id ", ids[i], " at position ", i, " is outside the vocabulary 0..", V - 1);
    input[size_t(i)] = ids[i];
  }
  TextModel<float>& model = *impl_->ck.model;
  model.encode(input.data(), 1);
  std::vector<float> out(size_t(n) * size_t(V));
  std::vector<int64_t> positions(static_cast<size_t>(n));
  std::iota(positions.begin(), positions.end(), int64_t(0));
  for (int64_t m = 0; m < n; m += TextModel<float>::kMlmChunk) {
    const int64_t count = std::min<int64_t>(TextModel<float>::kMlmChunk, n - m);
    std::copy_n(model.mlm_logits(positions.data() + m, count), size_t(count) * size_t(V), out.begin() + m * V);
  }
  return out;
}

std::vector<std::vector<MaskFill>> FillMask::fill(const std::string& text, int top) {
  use_process_threads();
  if (top < 1) fail("failed to fill masks: top ", top, " (expected a count >= 1)");
  const std::vector<std::string> parts = split_at_masks(text);
  std::vector<int64_t> positions;
  const std::vector<int32_t> ids = impl_->input(text, parts, &positions);
  const int V = impl_->ck.config.vocab_size;
  TextModel<float>& model = *impl_->ck.model;
  model.encode(ids.data(), 1);
  top = std::min(top, V);
  std::vector<std::vector<MaskFill>> out;
  std::vector<int> order(static_cast<size_t>(V));
  for (size_t m = 0; m < positions.size(); m += size_t(TextModel<float>::kMlmChunk)) {
    const int64_t count = std::min<int64_t>(TextModel<float>::kMlmChunk, int64_t(positions.size() - m));
    const float* logits = model.mlm_logits(positions.data() + m, count);
    for (int64_t k = 0; k < count; ++k) {
      const float* row = logits + k * V;
      const float mx = *std::max_element(row, row + V);
      double sum = 0;
      for (int v = 0; v < V; ++v) sum += std::exp(double(row[v] - mx));
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + top, order.end(),
                        [&](int a, int b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
      // The text before and after this mask, the other masks kept as written.
      const size_t mask = m + size_t(k);
      std::string before = parts[0], after = parts[mask + 1];
      for (size_t i = 1; i <= mask; ++i) before += std::string(kMaskText) + parts[i];
      for (size_t i = mask + 2; i < parts.size(); ++i) after += std::string(kMaskText) + parts[i];
      std::vector<MaskFill>& fills = out.emplace_back();
      for (int t = 0; t < top; ++t) {
        const int id = order[size_t(t)];
        bool starts_word = false;
        const std::string word = piece_text(impl_->ck.tokenizer->id_to_piece(id), &starts_word);
        const bool space = starts_word && !before.empty() && !std::isspace(static_cast<unsigned char>(before.back()));
        std::string sequence = before;
        sequence.append(space ? " " : "").append(word).append(after);
        fills.push_back({id, word, float(std::exp(double(row[id] - mx)) / sum), std::move(sequence)});
      }
    }
  }
  return out;
}

}  // namespace gmlp
