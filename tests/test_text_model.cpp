// The masked-language models (gMLP, aMLP, BERT with absolute or T5 relative positions): every
// parameter gradient of the MLM and classification losses against finite differences in
// double, and logits, losses and every gradient against the PyTorch reference
// (tests/reference/text_models.py, fixtures from make_fixtures.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <sstream>

#include "check.h"
#include "core/error.h"
#include "core/gemm.h"
#include "core/matmul.h"
#include "core/threads.h"
#include "gmlp/fill_mask.h"
#include "gmlp/text_classifier.h"
#include "io/safetensors.h"
#include "nn/text_model.h"
#include "ops/cross_entropy.h"
#include "text/mlm.h"
#include "text/tasks.h"
#include "text/tokenizer.h"
#include "tolerances.h"
#include "train/lm_trainer.h"
#include "train/optimizer.h"

namespace gmlp {
namespace {

using test::close;

// A model kind, or one with "_seg": the same with segment embeddings.
const std::vector<std::string> kTextKinds = {"gmlp", "amlp", "bert", "bert_rel", "gmlp_seg", "bert_seg"};

void set_kind(TextConfig& c, const std::string& kind) {
  const std::string seg = "_seg";
  c.segments = kind.size() > seg.size() && kind.compare(kind.size() - seg.size(), seg.size(), seg) == 0;
  c.model = parse_model_kind(c.segments ? kind.substr(0, kind.size() - seg.size()) : kind, Domain::text);
}

TextConfig tiny_text(const std::string& kind) {
  TextConfig c;
  set_kind(c, kind);
  c.vocab_size = 13, c.seq_len = 5, c.depth = 2, c.dim = 6, c.ffn = 8;
  c.heads = 2, c.attn_dim = 3, c.num_classes = 3, c.rel_buckets = 6, c.rel_max_distance = 8;
  return c;
}

// O(1) random weights everywhere (as the reference's randomize_).
template <class T>
void randomize(TextModel<T>& m, Rng& rng) {
  for (const ParamInfo& p : m.params()) {
    const bool norm_weight = p.name.find("norm.weight") != std::string::npos ||
                             p.name.find("norm1.weight") != std::string::npos ||
                             p.name.find("norm2.weight") != std::string::npos;
    for (int64_t i = 0; i < p.numel; ++i) {
      const double x = rng.normal();
      const int64_t fan_in = p.shape.size() >= 2 ? p.numel / p.shape[0] : 1;
      m.weights()[p.offset + i] =
          T(p.shape.size() >= 2 ? x / std::sqrt(double(fan_in)) : (norm_weight ? 1 + 0.2 * x : 0.2 * x));
    }
  }
}

using test::OneThread;

class TextKind : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(TextModels, TextKind, ::testing::ValuesIn(kTextKinds));

TEST_P(TextKind, EveryGradientMatchesFiniteDifferences) {
  const OneThread one_thread;
  TextModel<double> m(tiny_text(GetParam()));
  Rng rng(61);
  randomize(m, rng);
  const int64_t B = 2, N = m.config().seq_len, V = m.config().vocab_size, K = m.config().num_classes;
  std::vector<int32_t> ids(B * N);
  for (auto& id : ids) id = int32_t(1 + rng.below(uint64_t(V - 1)));
  ids[1] = ids[N + 2] = text::Tokenizer::kSep;  // two segments in each row
  ids[N - 1] = ids[2 * N - 1] = 0;              // a [PAD] at the end of each row (masked in attention)
  const std::vector<int64_t> positions = {0, 3, 6, 9};
  const std::vector<int32_t> labels = {5, 1, 12, 7}, cls_labels = {2, 0};
  m.plan(B);
  std::vector<double> probs(B * K), dlogits(B * K);
  // Two losses: MLM (mean over the positions) and classification from [CLS].
  auto mlm_loss = [&] {
    m.encode(ids.data(), B);
    return m.mlm(positions.data(), labels.data(), 4, false).loss_sum / 4;
  };
  auto cls_loss = [&] {
    m.encode(ids.data(), B);
    return cross_entropy_forward(probs.data(), m.classify(), cls_labels.data(), B, K, 0.0);
  };
  for (int which = 0; which < 2; ++which) {
    m.zero_grad();
    m.encode(ids.data(), B);
    if (which == 0) {
      m.mlm(positions.data(), labels.data(), 4, true);
    } else {
      cross_entropy_forward(probs.data(), m.classify(), cls_labels.data(), B, K, 0.0);
      cross_entropy_backward(dlogits.data(), probs.data(), cls_labels.data(), B, K, 0.0);
      m.classify_backward(dlogits.data());
    }
    const std::vector<double> analytic(m.grads(), m.grads() + m.num_params());
    const std::vector<double> numeric =
        test::numeric_gradient(m.weights(), m.num_params(), [&] { return which == 0 ? mlm_loss() : cls_loss(); });
    for (const ParamInfo& p : m.params())
      EXPECT_TRUE(close((which == 0 ? "mlm " : "cls ") + p.name, analytic.data() + p.offset, numeric.data() + p.offset,
                        p.numel, tol::kFdRel));
  }
}

// Finetuning's stochastic depth (finetune --drop-path): with the same draw of dropped rows, the
// classification gradient still matches finite differences, and the draw does drop something.
TEST_P(TextKind, DropPathGradientMatchesFiniteDifferences) {
  const OneThread one_thread;
  TextConfig c = tiny_text(GetParam());
  c.drop_path = 0.5;  // block 0 at 0, block 1 at 0.5 (linear in depth)
  TextModel<double> m(c);
  Rng rng(67);
  randomize(m, rng);
  const int64_t B = 6, N = c.seq_len, V = c.vocab_size, K = c.num_classes;
  std::vector<int32_t> ids(B * N), labels(B);
  for (auto& id : ids) id = int32_t(1 + rng.below(uint64_t(V - 1)));
  for (auto& y : labels) y = int32_t(rng.below(uint64_t(K)));
  m.plan(B);
  std::vector<double> probs(B * K), dlogits(B * K);
  auto loss = [&](bool train) {
    Rng draw(5);  // the same rows dropped at every evaluation
    m.encode(ids.data(), B, train ? &draw : nullptr);
    return cross_entropy_forward(probs.data(), m.classify(), labels.data(), B, K, 0.0);
  };
  EXPECT_GT(std::abs(loss(true) - loss(false)), 1e-6) << "no row was dropped";
  m.zero_grad();
  loss(true);
  cross_entropy_backward(dlogits.data(), probs.data(), labels.data(), B, K, 0.0);
  m.classify_backward(dlogits.data());
  const std::vector<double> analytic(m.grads(), m.grads() + m.num_params());
  const std::vector<double> numeric = test::numeric_gradient(m.weights(), m.num_params(), [&] { return loss(true); });
  for (const ParamInfo& p : m.params())
    EXPECT_TRUE(close(p.name, analytic.data() + p.offset, numeric.data() + p.offset, p.numel, tol::kFdRel));
}

std::string fixture(const std::string& name) {
  const char* dir = std::getenv("GMLP_FIXTURES");
  return std::string(dir ? dir : "fixtures") + "/" + name;
}

TEST_P(TextKind, MatchesPyTorchReference) {
  const std::string io_path = fixture("text_" + GetParam() + ".io.safetensors");
  ASSERT_TRUE(std::filesystem::exists(io_path))
      << io_path << " is missing: run tests/reference/make_fixtures.py (ctest does it first)";
  const st::File weights = st::File::open(fixture("text_" + GetParam() + ".model.safetensors"));
  const st::File io = st::File::open(io_path);
  TextModel<float> m(TextConfig::from_json(nlohmann::json::parse(io.metadata().at("config"))));
  for (const ParamInfo& p : m.params()) {
    const std::vector<float> v = weights.read_f32(p.name, p.shape);
    std::copy(v.begin(), v.end(), m.weights() + p.offset);
  }
  std::vector<int32_t> ids, labels, cls_labels;
  for (int64_t v : io.read_i64("ids")) ids.push_back(int32_t(v));
  for (int64_t v : io.read_i64("mlm_labels")) labels.push_back(int32_t(v));
  for (int64_t v : io.read_i64("cls_labels")) cls_labels.push_back(int32_t(v));
  const std::vector<int64_t> positions = io.read_i64("positions");
  const int64_t N = m.config().seq_len, B = int64_t(ids.size()) / N, V = m.config().vocab_size,
                K = m.config().num_classes, count = int64_t(positions.size());
  m.plan(B);

  // Logits as gradients are compared: |error| / max(1, |reference|) (a vocabulary's logits
  // include many near zero, where a purely relative error would measure float rounding).
  m.encode(ids.data(), B);
  EXPECT_TRUE(close("mlm logits", m.mlm_logits(positions.data(), count), io.read_f32("mlm_logits").data(), count * V,
                    tol::kTimmLogits));
  m.zero_grad();
  const auto r = m.mlm(positions.data(), labels.data(), count, true);
  EXPECT_NEAR(r.loss_sum / count, io.read_f32("mlm_loss")[0], tol::kTimmLogits);
  for (const ParamInfo& p : m.params())
    EXPECT_TRUE(close("mlm grad " + p.name, m.grads() + p.offset, io.read_f32("mlm_grad." + p.name).data(), p.numel,
                      tol::kTimmGrad));

  m.zero_grad();
  m.encode(ids.data(), B);
  const float* logits = m.classify();
  EXPECT_TRUE(close("cls logits", logits, io.read_f32("cls_logits").data(), B * K, tol::kTimmLogits));
  std::vector<float> probs(B * K), dlogits(B * K);
  const float loss = cross_entropy_forward(probs.data(), logits, cls_labels.data(), B, K, 0.f);
  EXPECT_NEAR(loss, io.read_f32("cls_loss")[0], tol::kTimmLogits);
  cross_entropy_backward(dlogits.data(), probs.data(), cls_labels.data(), B, K, 0.f);
  m.classify_backward(dlogits.data());
  for (const ParamInfo& p : m.params())
    EXPECT_TRUE(close("cls grad " + p.name, m.grads() + p.offset, io.read_f32("cls_grad." + p.name).data(), p.numel,
                      tol::kTimmGrad));
}

TEST(TextModel, T5BucketsMatchTheReferenceFormula) {
  // transformers' bidirectional bucketing with 32 buckets, max distance 128: exact near zero,
  // log-spaced beyond 8, keys after the query in the upper half.
  EXPECT_EQ(t5_bucket(0, 32, 128), 0);
  EXPECT_EQ(t5_bucket(-3, 32, 128), 3);
  EXPECT_EQ(t5_bucket(3, 32, 128), 19);
  EXPECT_EQ(t5_bucket(-8, 32, 128), 8);
  EXPECT_EQ(t5_bucket(-20, 32, 128), 10);  // 8 + int(log(2.5)/log(16)·8) = 8 + 2
  EXPECT_EQ(t5_bucket(-1000, 32, 128), 15);
  EXPECT_EQ(t5_bucket(1000, 32, 128), 31);
}

TEST(TextModel, RejectsTokenIdsOutsideTheVocabulary) {
  TextModel<float> m(tiny_text("gmlp"));
  m.plan(1);
  std::vector<int32_t> ids(5, 0);
  ids[3] = 13;
  EXPECT_THROW(m.encode(ids.data(), 1), Error);
}

}  // namespace
}  // namespace gmlp

namespace gmlp {
namespace {

// A randomized small text model (big enough for threads to split work) and a batch of ids with
// [PAD] at the end of each row.
struct TextCase {
  TextModel<float> m;
  std::vector<int32_t> ids;
  int64_t B;
  TextCase(const std::string& kind, int64_t batch, uint64_t seed, int vocab = 50)
      : m([&] {
          TextConfig c;
          set_kind(c, kind);
          c.vocab_size = vocab, c.seq_len = 24, c.depth = 2, c.dim = 32, c.ffn = 64;
          c.heads = 4, c.attn_dim = 8, c.num_classes = 3;
          return c;
        }()),
        B(batch) {
    Rng rng(seed);
    randomize(m, rng);
    const int64_t N = m.config().seq_len;
    ids.resize(size_t(B * N));
    for (int64_t i = 0; i < B * N; ++i) ids[i] = (i % N) >= N - 3 ? 0 : int32_t(1 + rng.below(uint64_t(vocab - 1)));
    for (int64_t b = 0; b < B; ++b) ids[b * N + N / 2 - b % 3] = text::Tokenizer::kSep;  // two segments
    m.plan(B);
  }
  // Classification logits and every gradient of the MLM loss at a fixed set of positions.
  std::pair<std::vector<float>, std::vector<float>> run() {
    const int64_t N = m.config().seq_len;
    std::vector<int64_t> positions;
    std::vector<int32_t> labels;
    for (int64_t p = 1; p < B * N; p += 5) positions.push_back(p), labels.push_back(int32_t(p % 7 + 5));
    m.encode(ids.data(), B);
    const float* lg = m.classify();
    std::vector<float> logits(lg, lg + B * m.config().num_classes);
    m.zero_grad();
    m.mlm(positions.data(), labels.data(), int64_t(positions.size()), true);
    return {logits, std::vector<float>(m.grads(), m.grads() + m.num_params())};
  }
};

TEST_P(TextKind, OneThreadEqualsTwo) {
  TextCase tc(GetParam(), 6, 71);
  const int saved = num_threads();
  set_threads(1);
  const auto one = tc.run();
  set_threads(2);
  const auto two = tc.run();
  set_threads(saved);
  EXPECT_TRUE(close("logits", two.first, one.first, tol::kInvariance));
  EXPECT_TRUE(close("grads", two.second, one.second, tol::kInvariance));
}

TEST_P(TextKind, BatchEqualsRowsOneAtATime) {
  TextCase tc(GetParam(), 4, 72);
  const int64_t N = tc.m.config().seq_len, K = tc.m.config().num_classes;
  tc.m.encode(tc.ids.data(), tc.B);
  const std::vector<float> batched(tc.m.classify(), tc.m.classify() + tc.B * K);
  for (int64_t b = 0; b < tc.B; ++b) {
    tc.m.encode(tc.ids.data() + b * N, 1);
    EXPECT_TRUE(close("row " + std::to_string(b), tc.m.classify(), batched.data() + b * K, K, tol::kInvariance));
  }
}

// bf16 precision on every text kind (padding masks, relative positions, segments): the [CLS]
// logits and the masked-token gradients track f32's at the bar of Invariance.Bf16TracksF32, and
// storing the activations that only products read as bfloat16 (bf16_activations()) keeps every
// bit of them.
TEST_P(TextKind, Bf16TracksF32AndStoredActivationsKeepTheBits) {
  if (!gemm::bf16_available()) GTEST_SKIP() << "no bf16 product on this CPU";
  TextCase tc(GetParam(), 3, 74);
  const auto f32 = tc.run();
  set_matmul_precision(Precision::bf16);
  tc.m.plan(tc.B);  // a plan made in bf16 has room for the bf16 copies
  set_bf16_activations(false);
  const auto floats = tc.run();
  set_bf16_activations(true);
  const auto stored = tc.run();
  set_matmul_precision(Precision::f32);
  EXPECT_EQ(floats.first, stored.first) << "logits";
  EXPECT_EQ(floats.second, stored.second) << "gradients";
  EXPECT_TRUE(close("logits", stored.first, f32.first, 0.05));
  EXPECT_GT(test::cosine(f32.second, stored.second), 0.999) << "cosine similarity of the gradients";
  EXPECT_FALSE(close("logits", stored.first, f32.first, 1e-6)) << "bf16 must actually round";
}

// A text's outputs do not depend on the padding after it: "[CLS] text [SEP]" padded to 24 and
// the same in a copy of the model cut to 9 tokens (finetune --seq-len's copy) give the same
// masked-token and [CLS] logits. Every kind masks [PAD]: attention's keys, gMLP's token mix.
TEST_P(TextKind, OutputsDoNotDependOnThePaddingAfterTheText) {
  TextCase tc(GetParam(), 1, 73);
  TextConfig short_config = tc.m.config();
  short_config.seq_len = 9;
  TextModel<float> cut(short_config);
  copy_weights_to_length(tc.m, cut);
  const int64_t K = tc.m.config().num_classes, V = tc.m.config().vocab_size, n = 7;
  const std::vector<int32_t> text = {text::Tokenizer::kCls, 11, 23, 7, 42, 19, text::Tokenizer::kSep};
  std::vector<int32_t> long_ids(24, text::Tokenizer::kPad), short_ids(9, text::Tokenizer::kPad);
  std::copy(text.begin(), text.end(), long_ids.begin());
  std::copy(text.begin(), text.end(), short_ids.begin());
  std::vector<int64_t> positions(n);
  std::iota(positions.begin(), positions.end(), 0);
  auto logits = [&](TextModel<float>& m, const std::vector<int32_t>& ids) {
    m.plan(1);
    m.encode(ids.data(), 1);
    std::vector<float> out(m.mlm_logits(positions.data(), n), m.mlm_logits(positions.data(), n) + n * V);
    out.insert(out.end(), m.classify(), m.classify() + K);
    return out;
  };
  const std::vector<float> at24 = logits(tc.m, long_ids), at9 = logits(cut, short_ids);
  EXPECT_TRUE(close("logits at 9 vs 24 tokens", at9, at24, tol::kInvariance));
  if (!model_kind_info(tc.m.config().model).gated) return;
  // Without the mask (a checkpoint from before it) the padding reaches the text.
  TextConfig unmasked = tc.m.config(), unmasked_short = short_config;
  unmasked.gate_pad_mask = unmasked_short.gate_pad_mask = false;
  TextModel<float> open_long(unmasked), open_short(unmasked_short);
  std::copy(tc.m.weights(), tc.m.weights() + tc.m.num_params(), open_long.weights());
  copy_weights_to_length(open_long, open_short);
  EXPECT_FALSE(close("unmasked", logits(open_short, short_ids), logits(open_long, long_ids), tol::kInvariance));
}

TEST(TextModel, GatePadMaskIsOnForNewModelsAndOffForCheckpointsSavedBeforeIt) {
  TextConfig c;
  EXPECT_TRUE(c.gate_pad_mask);
  EXPECT_TRUE(TextConfig::from_json(c.to_json()).gate_pad_mask);
  nlohmann::json old = c.to_json();
  old.erase("gate_pad_mask");
  EXPECT_FALSE(TextConfig::from_json(old).gate_pad_mask);
}

// Pretraining with the next-sentence objective backpropagates both losses through one encoder
// backward (mlm with cls_dlogits), and so does finetuning with --mlm-weight w: the gradients are
// those of the classification loss plus w times the masked-token loss, each of which is held to
// PyTorch and finite differences above.
TEST_P(TextKind, MaskedTokenAndClassificationLossesShareOneBackward) {
  for (const float w : {1.f, 0.3f}) {
    SCOPED_TRACE("masked-token weight " + std::to_string(w));
    TextCase tc(GetParam(), 4, 74);
    const int64_t N = tc.m.config().seq_len, K = tc.m.config().num_classes, P = tc.m.num_params();
    std::vector<int64_t> positions;
    std::vector<int32_t> labels, classes = {0, 2, 1, 2};
    for (int64_t p = 2; p < tc.B * N; p += 7) positions.push_back(p), labels.push_back(int32_t(p % 5 + 5));
    const int64_t count = int64_t(positions.size());
    std::vector<float> probs(size_t(tc.B * K)), dlogits(size_t(tc.B * K));
    auto cls_grad = [&] {
      const float* logits = tc.m.classify();
      cross_entropy_forward(probs.data(), logits, classes.data(), tc.B, K, 0.f);
      cross_entropy_backward(dlogits.data(), probs.data(), classes.data(), tc.B, K, 0.f);
    };
    tc.m.encode(tc.ids.data(), tc.B);
    tc.m.zero_grad();
    cls_grad();
    const auto both = tc.m.mlm(positions.data(), labels.data(), count, true, dlogits.data(), w);
    const std::vector<float> joint(tc.m.grads(), tc.m.grads() + P);

    tc.m.encode(tc.ids.data(), tc.B);
    tc.m.zero_grad();
    const auto alone = tc.m.mlm(positions.data(), labels.data(), count, true);
    std::vector<float> sum(tc.m.grads(), tc.m.grads() + P);
    for (float& g : sum) g *= w;
    tc.m.zero_grad();
    cls_grad();
    tc.m.classify_backward(dlogits.data());
    for (int64_t i = 0; i < P; ++i) sum[size_t(i)] += tc.m.grads()[i];
    EXPECT_EQ(both.loss_sum, alone.loss_sum);
    EXPECT_TRUE(close("grads", joint, sum, tol::kInvariance));
    // The classification gradient is not lost: it moves the head.
    const ParamInfo& head = tc.m.param("cls_head.weight");
    double norm = 0;
    for (int64_t i = 0; i < head.numel; ++i) norm += std::abs(joint[size_t(head.offset + i)]);
    EXPECT_GT(norm, 0.0);
  }
}

TEST_P(TextKind, InferencePlanAndSaveLoadGiveIdenticalLogits) {
  // A tokenizer is part of a text checkpoint: train a tiny one and size the model to it.
  std::vector<std::string> lines;
  lines.reserve(40);
  for (int i = 0; i < 40; ++i) lines.push_back("and the earth was without form and void " + std::to_string(i));
  const std::string dir = ::testing::TempDir() + "gmlp_text_" + GetParam();
  std::filesystem::create_directories(dir);
  const text::Tokenizer tok = text::Tokenizer::train(lines, dir + "/tok", 34);
  TextCase tc(GetParam(), 3, 73, tok.vocab_size());
  const int64_t K = tc.m.config().num_classes;
  tc.m.encode(tc.ids.data(), tc.B);
  const std::vector<float> before(tc.m.classify(), tc.m.classify() + tc.B * K);
  const std::string path = dir + "/checkpoint.safetensors";
  save_text_checkpoint(path, tc.m, tok, {{"epoch", "1"}});
  TextCheckpoint ck = load_text_checkpoint(path);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(ck.config.to_json(), tc.m.config().to_json());
  EXPECT_EQ(ck.tokenizer->serialized(), tok.serialized());
  ck.model->plan(tc.B, Mode::infer);
  EXPECT_LT(ck.model->activation_bytes(), tc.m.activation_bytes());
  ck.model->encode(tc.ids.data(), tc.B);
  const float* after = ck.model->classify();
  for (int64_t i = 0; i < tc.B * K; ++i) ASSERT_EQ(after[i], before[i]) << "logit " << i;
}

// mlm()'s hit counts against the logits themselves: arg-max hits, and top-5 hits (the label
// among the five highest logits, ties to the lower id).
TEST_P(TextKind, MaskedTokenTop1AndTop5CountFromTheLogits) {
  TextCase tc(GetParam(), 2, 79);
  const int64_t N = tc.m.config().seq_len, V = tc.m.config().vocab_size;
  std::vector<int64_t> positions;
  for (int64_t p = 1; p < 2 * N; p += 3) positions.push_back(p);
  const int64_t count = int64_t(positions.size());
  tc.m.plan(2, Mode::infer);
  tc.m.encode(tc.ids.data(), 2);
  // Labels of every rank: position k's label is its (k mod 8)-th highest logit's token.
  const float* logits = tc.m.mlm_logits(positions.data(), count);
  std::vector<int32_t> labels;
  for (int64_t k = 0; k < count; ++k) {
    std::vector<int32_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    const float* row = logits + k * V;
    std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return row[x] > row[y]; });
    labels.push_back(order[size_t(k % 8)]);
  }
  int64_t top1 = 0, top5 = 0;
  for (int64_t k = 0; k < count; ++k) top1 += k % 8 == 0, top5 += k % 8 < 5;
  const auto r = tc.m.mlm(positions.data(), labels.data(), count, false);
  EXPECT_EQ(r.correct, top1);
  EXPECT_EQ(r.top5, top5);
}

// gmlp fill-mask (the public FillMask) and pretraining's evaluation see the same input: a text
// with words masked gives, through FillMask, the same masked-token loss as the text packed as
// pretraining packs it ([CLS] ... [SEP], padded), masked at those words and scored by mlm().
TEST_P(TextKind, FillMaskGivesPretrainingsMaskedTokenLoss) {
  // Seven words in random orders: a vocabulary of 28 holds each as one piece ("▁earth").
  const char* vocabulary[] = {"and", "the", "earth", "was", "without", "form", "void"};
  std::vector<std::string> lines;
  Rng draw(5);
  for (int i = 0; i < 300; ++i) {
    std::string line;
    for (int w = 0; w < 8; ++w) line += (w ? " " : "") + std::string(vocabulary[draw.below(7)]);
    lines.push_back(line);
  }
  const std::string dir = ::testing::TempDir() + "gmlp_fill_" + GetParam();
  std::filesystem::create_directories(dir);
  const text::Tokenizer tok = text::Tokenizer::train(lines, dir + "/tok", 28);
  TextCase tc(GetParam(), 1, 75, tok.vocab_size());
  const std::string path = dir + "/checkpoint.safetensors";
  save_text_checkpoint(path, tc.m, tok);
  FillMask fill(path);
  std::filesystem::remove_all(dir);

  // The words that are one piece each, masked in the text, and their pieces' ids.
  const std::string text = "the earth was without form";
  std::string masked;
  std::vector<int32_t> labels;
  std::istringstream words(text);
  for (std::string w; words >> w;) {
    const std::vector<int32_t> ids = tok.encode(w);
    const bool mask = ids.size() == 1 && labels.size() < 2;
    if (mask) labels.push_back(ids[0]);
    masked += (masked.empty() ? "" : " ") + (mask ? std::string("[MASK]") : w);
  }
  ASSERT_EQ(labels.size(), 2u) << "no two whole-word pieces to mask in '" << text << "'";

  // FillMask: -log of each label's probability, every token asked for.
  const int V = tok.vocab_size();
  const std::vector<std::vector<MaskFill>> fills = fill.fill(masked, V);
  ASSERT_EQ(fills.size(), labels.size());
  double fill_loss = 0;
  for (size_t m = 0; m < fills.size(); ++m)
    for (const MaskFill& f : fills[m])
      if (f.token == labels[m]) fill_loss -= std::log(double(f.score));

  // Pretraining: the text packed, its label tokens masked, scored as evaluation scores.
  const int64_t N = tc.m.config().seq_len;
  std::vector<int32_t> seq = text::pack_sequences({tok.encode(text)}, int(N)).at(0);
  std::vector<int64_t> positions;
  for (int32_t label : labels)
    for (int64_t p = 0; p < N; ++p)
      if (seq[size_t(p)] == label && std::find(positions.begin(), positions.end(), p) == positions.end()) {
        positions.push_back(p), seq[size_t(p)] = text::Tokenizer::kMask;
        break;
      }
  ASSERT_EQ(positions.size(), labels.size());
  tc.m.plan(1, Mode::infer);
  tc.m.encode(seq.data(), 1);
  const double eval_loss = tc.m.mlm(positions.data(), labels.data(), int64_t(labels.size()), false).loss_sum;
  EXPECT_NEAR(fill_loss / double(labels.size()), eval_loss / double(labels.size()), 1e-5 * std::abs(eval_loss))
      << "fill-mask's input differs from pretraining's";

  // Called from a thread the application started, it runs on set_threads()'s count.
  const int saved = num_threads();
  set_threads(1);
  size_t filled = 0;
  EXPECT_EQ(test::team_after_call_on_new_thread([&] { filled = fill.fill(masked, 3).size(); }), 1);
  EXPECT_EQ(filled, labels.size());
  set_threads(saved);
}

// The public TextClassifier gives the model's own [CLS] logits for texts laid out as finetuning
// lays them out ("[CLS] a [SEP]", or "[CLS] a [SEP] b [SEP]" for a pair task), batch or one.
TEST_P(TextKind, TextClassifierGivesTheModelsLogits) {
  std::vector<std::string> lines;
  lines.reserve(40);
  for (int i = 0; i < 40; ++i) lines.push_back("and the earth was without form and void " + std::to_string(i));
  const std::string dir = ::testing::TempDir() + "gmlp_textclf_" + GetParam();
  std::filesystem::create_directories(dir);
  const text::Tokenizer tok = text::Tokenizer::train(lines, dir + "/tok", 34);
  TextCase tc(GetParam(), 3, 77, tok.vocab_size());
  const int64_t N = tc.m.config().seq_len, K = tc.m.config().num_classes;
  const std::vector<std::string> a = {"and the earth", "was without form and void 12", "void"};
  const std::vector<std::string> b = {"form", "and the earth was", "without 3"};
  for (const char* task : {"genre", "next-verse"}) {
    SCOPED_TRACE(task);
    const bool pairs = std::string(task) == "next-verse";
    const std::string path = dir + "/" + task + ".safetensors";
    save_text_checkpoint(path, tc.m, tok, {{"task", task}, {"classes", R"(["x", "y", "z"])"}});
    TextClassifier clf(path);
    EXPECT_EQ(clf.takes_pairs(), pairs);
    EXPECT_EQ(clf.class_names(), (std::vector<std::string>{"x", "y", "z"}));
    std::vector<int32_t> ids;
    for (size_t i = 0; i < a.size(); ++i) {
      const std::vector<int32_t> row = pairs ? text::segment_pair(tok.encode(a[i]), tok.encode(b[i]), int(N))
                                             : text::single_segment(tok.encode(a[i]), int(N));
      ids.insert(ids.end(), row.begin(), row.end());
    }
    tc.m.plan(3, Mode::infer);
    tc.m.encode(ids.data(), 3);
    const std::vector<float> expected(tc.m.classify(), tc.m.classify() + 3 * K);
    const std::vector<float> got = pairs ? clf.logits(a, b) : clf.logits(a);
    EXPECT_TRUE(close("logits", got, expected, tol::kInvariance));
    // One at a time: its top class is the batch's arg-max, probabilities summing to 1.
    const std::vector<Prediction> one = pairs ? clf.classify(a[1], 3, b[1]) : clf.classify(a[1], 3);
    ASSERT_EQ(one.size(), 3u);
    EXPECT_EQ(one[0].label, std::max_element(got.begin() + K, got.begin() + 2 * K) - got.begin() - K);
    EXPECT_NEAR(one[0].probability + one[1].probability + one[2].probability, 1.0, 1e-6);
    // Called from a thread the application started, it runs on set_threads()'s count.
    const int saved = num_threads();
    set_threads(1);
    std::vector<float> from_worker;
    EXPECT_EQ(test::team_after_call_on_new_thread([&] { from_worker = pairs ? clf.logits(a, b) : clf.logits(a); }), 1);
    EXPECT_TRUE(close("logits from a worker", from_worker, expected, tol::kInvariance));
    set_threads(saved);
  }
  std::filesystem::remove_all(dir);
}

// --layer-decay: with L blocks, blocks.<i>.* learns at decay^(L-i) times the rate, everything
// registered before the first block (token, position, segment embeddings, relative biases) at
// decay^(L+1), and the final norm and heads at the full rate.
TEST(LayerDecay, ScalesFollowTheBlockIndex) {
  for (const std::string kind : {"bert_seg", "bert_rel", "amlp"}) {
    TextConfig c = tiny_text(kind);
    c.depth = 3;
    const TextModel<float> m(c);
    const std::vector<double> s = layer_decay_scales(m.params(), 0.5);
    ASSERT_EQ(s.size(), m.params().size());
    bool seen_block = false;
    for (size_t i = 0; i < s.size(); ++i) {
      const std::string& name = m.params()[i].name;
      double want = 1.0;
      if (name.rfind("blocks.", 0) == 0) {
        seen_block = true;
        want = std::pow(0.5, 3 - std::stoi(name.substr(7)));
      } else if (!seen_block) {
        want = 0.125 * 0.5;
      }
      EXPECT_EQ(s[i], want) << kind << " " << name;
    }
    for (const char* stem : {"embed.weight", "rel_bias.weight", "segment_embed.weight", "pos_embed"})
      for (size_t i = 0; i < s.size(); ++i) {
        if (m.params()[i].name == stem) {
          EXPECT_EQ(s[i], 0.0625) << kind << " " << stem;
        }
      }
    for (double x : layer_decay_scales(m.params(), 1.0)) EXPECT_EQ(x, 1.0);
    EXPECT_THROW(layer_decay_scales(m.params(), 0.0), Error);
    EXPECT_THROW(layer_decay_scales(m.params(), 1.5), Error);
  }
  // Two-digit block indices are read whole.
  ParamTable t;
  t.add("embed.weight", {2}, true);
  for (int b = 0; b < 12; ++b) t.add("blocks." + std::to_string(b) + ".fc.weight", {2}, true);
  t.add("head.weight", {2}, true);
  const std::vector<double> s = layer_decay_scales(t.list(), 0.8);
  EXPECT_DOUBLE_EQ(s[0], std::pow(0.8, 13));
  EXPECT_DOUBLE_EQ(s[11], std::pow(0.8, 2));  // blocks.10
  EXPECT_DOUBLE_EQ(s[12], 0.8);               // blocks.11
  EXPECT_EQ(s[13], 1.0);
}

}  // namespace
}  // namespace gmlp
