// The public TextClassifier (include/gmlp/text_classifier.h) over the engine: a finetuned text
// checkpoint's encoder and [CLS] head under an inference memory plan, its tokenizer, its task's
// input layout (text/tasks.h) and a softmax for probabilities.
#include "gmlp/text_classifier.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>

#include "core/error.h"
#include "core/threads.h"
#include "ops/cross_entropy.h"
#include "text/tasks.h"
#include "text/tokenizer.h"
#include "train/lm_trainer.h"

namespace gmlp {

namespace {
constexpr int kBatch = 32;  // texts per forward pass of logits()
}

struct TextClassifier::Impl {
  TextCheckpoint ck;
  std::string task;
  bool pairs = false;
  std::vector<std::string> names;
  std::vector<int32_t> ids;  // one batch of (kBatch, seq_len) ids
};

TextClassifier::TextClassifier(const std::string& checkpoint) : impl_(std::make_unique<Impl>()) {
  use_process_threads();
  Impl& m = *impl_;
  m.ck = load_text_checkpoint(checkpoint);
  const auto task = m.ck.metadata.find("task");
  if (task == m.ck.metadata.end() || m.ck.config.num_classes <= 0)
    fail("'", checkpoint,
         "' is a masked-language model (gmlp pretrain), not a text classifier: finetune it first, "
         "gmlp finetune --init ",
         checkpoint);
  m.task = task->second;
  // "pairs" is recorded by finetune; a checkpoint from before it was, is of a KJV task.
  const auto pairs = m.ck.metadata.find("pairs");
  m.pairs = pairs != m.ck.metadata.end() ? pairs->second == "true" : text::is_pair(text::parse_task(m.task));
  const auto classes = m.ck.metadata.find("classes");
  if (classes != m.ck.metadata.end()) {
    const nlohmann::json names = nlohmann::json::parse(classes->second, nullptr, false);
    if (names.is_array() && int(names.size()) == num_classes())
      for (const auto& n : names) m.names.push_back(n.is_string() ? n.get<std::string>() : n.dump());
  }
  if (m.names.empty())
    for (int k = 0; k < num_classes(); ++k) m.names.push_back(cat("class ", k));
  m.ck.model->plan(kBatch, Mode::infer);
  m.ck.model->freeze();
  m.ids.resize(size_t(kBatch) * size_t(max_tokens()));
}
TextClassifier::~TextClassifier() = default;
TextClassifier::TextClassifier(TextClassifier&&) noexcept = default;
TextClassifier& TextClassifier::operator=(TextClassifier&&) noexcept = default;

int TextClassifier::num_classes() const { return impl_->ck.config.num_classes; }
const std::vector<std::string>& TextClassifier::class_names() const { return impl_->names; }
bool TextClassifier::takes_pairs() const { return impl_->pairs; }
const std::string& TextClassifier::task() const { return impl_->task; }
int TextClassifier::max_tokens() const { return impl_->ck.config.seq_len; }

std::vector<int32_t> TextClassifier::tokens(const std::string& text, const std::string& text_pair) const {
  const Impl& m = *impl_;
  const text::Tokenizer& tok = *m.ck.tokenizer;
  const int N = max_tokens();
  std::vector<int32_t> row = m.pairs ? text::segment_pair(tok.encode(text), tok.encode(text_pair), N)
                                     : text::single_segment(tok.encode(text), N);
  while (!row.empty() && row.back() == text::Tokenizer::kPad) row.pop_back();
  return row;
}

int TextClassifier::vocab_size() const { return impl_->ck.config.vocab_size; }

std::vector<float> TextClassifier::logits(const std::vector<std::string>& texts,
                                          const std::vector<std::string>& text_pairs) {
  Impl& m = *impl_;
  if (!text_pairs.empty() && text_pairs.size() != texts.size())
    fail("failed to classify text pairs: ", texts.size(), " texts but ", text_pairs.size(), " second texts");
  if (m.pairs && text_pairs.empty())
    fail("the model was finetuned on pairs of texts (", m.task, "): give each text its second text");
  if (!m.pairs && !text_pairs.empty()) fail("the model was finetuned on single texts (", m.task, "), not pairs");
  const size_t N = size_t(max_tokens());
  std::vector<int32_t> ids(texts.size() * N, text::Tokenizer::kPad);
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<int32_t> row = tokens(texts[i], m.pairs ? text_pairs[i] : std::string());
    std::copy(row.begin(), row.end(), ids.begin() + i * N);
  }
  return logits(ids.data(), int(texts.size()));
}

std::vector<float> TextClassifier::logits(const int32_t* ids, int n) {
  use_process_threads();
  Impl& m = *impl_;
  if (n < 0) fail("failed to classify: ", n, " sequences (expected a count >= 0)");
  const size_t N = size_t(max_tokens()), K = size_t(num_classes());
  for (size_t i = 0; i < size_t(n) * N; ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size())
      fail("failed to classify: token id ", ids[i], " at sequence ", i / N, ", position ", i % N,
           " is outside the vocabulary 0..", vocab_size() - 1);
  std::vector<float> out(size_t(n) * K);
  for (size_t start = 0; start < size_t(n); start += kBatch) {
    const size_t b = std::min(size_t(n) - start, size_t(kBatch));
    std::copy_n(ids + start * N, b * N, m.ids.begin());
    m.ck.model->encode(m.ids.data(), int64_t(b));
    const float* l = m.ck.model->classify();
    std::copy_n(l, b * K, out.begin() + start * K);
  }
  return out;
}

std::vector<Prediction> TextClassifier::top_classes(const float* logits, int top) const {
  const int K = num_classes();
  std::vector<float> probs(static_cast<size_t>(K));
  std::vector<int> order(static_cast<size_t>(K));
  const int32_t no_label = 0;  // the loss is not needed, only the softmax it writes
  cross_entropy_forward(probs.data(), logits, &no_label, 1, K, 0.f);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return probs[size_t(a)] > probs[size_t(b)]; });
  std::vector<Prediction> p;
  for (int t = 0; t < std::min(std::max(top, 1), K); ++t) {
    const int k = order[size_t(t)];
    p.push_back({k, impl_->names[size_t(k)], probs[size_t(k)]});
  }
  return p;
}

std::vector<std::vector<Prediction>> TextClassifier::classify(const std::vector<std::string>& texts, int top,
                                                              const std::vector<std::string>& text_pairs) {
  const size_t K = size_t(num_classes());
  const std::vector<float> l = logits(texts, text_pairs);
  std::vector<std::vector<Prediction>> out;
  for (size_t i = 0; i < texts.size(); ++i) out.push_back(top_classes(l.data() + i * K, top));
  return out;
}

std::vector<Prediction> TextClassifier::classify(const std::string& text, int top, const std::string& text_pair) {
  return impl_->pairs ? classify(std::vector<std::string>{text}, top, {text_pair})[0]
                      : classify(std::vector<std::string>{text}, top)[0];
}

}  // namespace gmlp
