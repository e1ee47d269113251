#include "nn/text_model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/profile.h"
#include "nn/init.h"
#include "nn/onnx_graph.h"
#include "ops/cross_entropy.h"
#include "ops/embedding.h"
#include "ops/layernorm.h"
#include "ops/linear.h"
#include "ops/rel_bias.h"
#include "text/tokenizer.h"

#define GMLP_PROFILE(name) const ::gmlp::profile::Scope gmlp_profile_scope(name)

namespace gmlp {

void TextConfig::validate() const {
  auto need = [](bool ok, const char* what, auto got) {
    if (!ok) fail("invalid text model config: ", what, " (got ", got, ")");
  };
  const ModelKindInfo& kind = model_kind_info(model);
  if (!kind.text) parse_model_kind(kind.name, Domain::text);  // throws, naming the text kinds
  need(vocab_size > 5 && vocab_size <= 1000000, "vocab_size must be in 6..1000000", vocab_size);
  need(seq_len > 1 && seq_len <= 8192, "seq_len must be in 2..8192", seq_len);
  need(depth > 0 && depth <= 1000, "depth must be in 1..1000", depth);
  need(dim > 0 && dim <= 65536, "dim must be in 1..65536", dim);
  need(ffn > 0 && ffn <= 262144, "ffn must be in 1..262144", ffn);
  need(num_classes >= 0 && num_classes <= 1000000, "num_classes must be in 0..1000000", num_classes);
  need(drop_path >= 0 && drop_path < 1, "drop_path must be in [0, 1)", drop_path);
  need(ln_eps > 0 && ln_eps <= 1, "ln_eps must be in (0, 1]", ln_eps);
  need(gate_eps > 0 && gate_eps <= 1, "gate_eps must be in (0, 1]", gate_eps);
  if (kind.gated) {
    need(gate == "split" || gate == "multiplicative" || gate == "additive" || gate == "linear",
         "gate must be split, multiplicative, additive or linear", gate);
    need(gate != "split" || ffn % 2 == 0, "ffn must be even for the split gate", ffn);
  }
  if (kind.tiny_attention) need(attn_dim > 0 && attn_dim <= 4096, "attn_dim must be in 1..4096", attn_dim);
  if (kind.heads) need(heads > 0 && dim % heads == 0, "heads must divide dim", heads);
  if (kind.positions == Positions::relative) {
    need(rel_buckets >= 4 && rel_buckets <= 1024 && rel_buckets % 2 == 0, "rel_buckets must be even, in 4..1024",
         rel_buckets);
    need(rel_max_distance > rel_buckets / 4 && rel_max_distance <= 1000000,
         "rel_max_distance must exceed rel_buckets/4 and be at most 1000000", rel_max_distance);
  }
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(TextConfig, model, vocab_size, seq_len, depth, dim, ffn, heads,
                                                attn_dim, gate, num_classes, pad_mask, gate_pad_mask, segments,
                                                rel_buckets, rel_max_distance, drop_path, ln_eps, gate_eps)

nlohmann::json TextConfig::to_json() const { return *this; }
TextConfig TextConfig::from_json(const nlohmann::json& j) {
  // The model's name first, so that an unknown one is answered with the text kinds.
  if (const auto it = j.find("model"); it != j.end() && it->is_string())
    parse_model_kind(it->get<std::string>(), Domain::text);
  TextConfig c = j.get<TextConfig>();
  if (!j.contains("gate_pad_mask")) c.gate_pad_mask = false;  // saved before the field: padding was mixed in
  return c;
}

const std::vector<TextPreset>& text_presets() {
  auto make = [](ModelKind model, int depth, int ffn) {
    TextConfig c;
    c.model = model, c.depth = depth, c.ffn = ffn;
    return c;
  };
  static const std::vector<TextPreset> all = {
      // 30 epochs: about an hour on two cores (AMD EPYC Zen 3), the masked-LM the README queries.
      {"kjv-gmlp", "gMLP, 4 blocks, d=256, e=1024, no positions (3.7M params)", make(ModelKind::gmlp, 4, 1024), 30},
      {"kjv-amlp", "aMLP, 4 blocks, d=256, e=896, tiny attention 64 (3.8M params)", make(ModelKind::amlp, 4, 896)},
      {"kjv-bert", "BERT (pre-LN), 2 blocks, d=256, 4 heads, MLP 1024, learned positions (3.7M params)",
       make(ModelKind::bert, 2, 1024)},
      {"kjv-bert-rel", "BERT (pre-LN), 2 blocks, d=256, 4 heads, MLP 1024, T5 relative positions (3.6M params)",
       make(ModelKind::bert_rel, 2, 1024)},
  };
  return all;
}

const TextPreset& find_text_preset(const std::string& name) {
  std::string known;
  for (const auto& p : text_presets()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  fail("unknown text preset '", name, "': known presets are ", known);
}

int t5_bucket(int relative_position, int num_buckets, int max_distance) {
  // transformers' T5Attention._relative_position_bucket, bidirectional.
  const int half = num_buckets / 2;
  int bucket = relative_position > 0 ? half : 0;
  const int n = std::abs(relative_position);
  const int max_exact = half / 2;
  if (n < max_exact) return bucket + n;
  const int large = max_exact + int(std::log(double(n) / max_exact) / std::log(double(max_distance) / max_exact) *
                                    (half - max_exact));
  return bucket + std::min(large, half - 1);
}

template <class T>
TextModel<T>::TextModel(const TextConfig& config, Storage storage) : cfg_(config) {
  cfg_.validate();
  const TextConfig& c = cfg_;
  ParamTable& t = this->table_;
  const int64_t V = c.vocab_size, N = c.seq_len, D = c.dim, L = c.depth;
  const BranchDims dims{N, D};
  const ModelKindInfo& kind = model_kind_info(c.model);
  const InitStyle style = kind.self_attention ? InitStyle::vit : InitStyle::mixer;
  embed_ = t.add("embed.weight", {V, D}, true);
  if (kind.positions == Positions::learned) pos_ = t.add("pos_embed", {1, N, D}, false);
  if (c.segments) seg_ = t.add("segment_embed.weight", {2, D}, true);
  if (kind.positions == Positions::relative) {
    rel_ = t.add("rel_bias.weight", {c.rel_buckets, c.heads}, true);
    buckets_.resize(storage == Storage::allocate ? size_t(N * N) : 0);
    for (int64_t i = 0; i < N && !buckets_.empty(); ++i)
      for (int64_t j = 0; j < N; ++j) buckets_[i * N + j] = t5_bucket(int(j - i), c.rel_buckets, c.rel_max_distance);
  }
  for (int64_t l = 0; l < L; ++l) {
    const std::string b = "blocks." + std::to_string(l) + ".";
    const double rate = L > 1 ? c.drop_path * double(l) / double(L - 1) : c.drop_path;
    auto sublayer = [&](const std::string& norm_name, auto make_branch) {
      this->mark_layer_begin();
      ResidualSpec s;
      s.norm = NormKind::layernorm, s.norm_name = b + norm_name, s.eps = float(c.ln_eps);
      s.drop_rate = rate;
      auto r = std::make_unique<Residual<T>>(t, s, N, D);
      r->attach(make_branch());
      layers_.push_back(std::move(r));
    };
    if (kind.gated) {
      sublayer("norm", [&] {
        return make_gating_mlp<T>(t, b + "mlp_channels", dims, c.ffn, c.gate, float(c.gate_eps),
                                  kind.tiny_attention ? c.attn_dim : 0, pads_masked() ? &score_bias_ : nullptr);
      });
    } else {
      GMLP_CHECK(kind.self_attention);
      sublayer("norm1", [&] { return make_self_attention<T>(t, b + "attn", dims, c.heads, style, &score_bias_); });
      sublayer("norm2", [&] { return make_channel_mlp<T>(t, b + "mlp", dims, c.ffn, style); });
    }
  }
  this->mark_layers_end();
  norm_w_ = t.add("norm.weight", {D}, false);
  norm_b_ = t.add("norm.bias", {D}, false);
  mlm_b_ = t.add("mlm_bias", {V}, false);
  if (c.num_classes > 0) {
    cls_w_ = t.add("cls_head.weight", {c.num_classes, D}, true);
    cls_b_ = t.add("cls_head.bias", {c.num_classes}, false);
  }
  this->allocate_params(storage, c.to_json());
}

template <class T>
void TextModel<T>::init(Rng& rng) {
  T* w = this->w_.data();
  const int64_t V = cfg_.vocab_size, N = cfg_.seq_len, D = cfg_.dim;
  init::trunc_normal(w + embed_, V * D, 0.02, rng);  // BERT: N(0, 0.02)
  if (pos_ >= 0) init::trunc_normal(w + pos_, N * D, 0.02, rng);
  // Zero, not BERT's N(0, 0.02): segments are added at finetuning, and a zero embedding leaves
  // the pretrained model's function as it was until the task's gradient moves it.
  if (seg_ >= 0) init::fill(w + seg_, 2 * D, T(0));
  if (rel_ >= 0) init::trunc_normal(w + rel_, int64_t(cfg_.rel_buckets) * cfg_.heads, 0.02, rng);
  for (const auto& layer : layers_) layer->init(w, rng);
  init::fill(w + norm_w_, D, T(1));
  init::fill(w + norm_b_, D, T(0));
  init::fill(w + mlm_b_, V, T(0));
  if (cls_w_ >= 0) {
    init::trunc_normal(w + cls_w_, int64_t(cfg_.num_classes) * D, 0.02, rng);
    init::fill(w + cls_b_, cfg_.num_classes, T(0));
  }
}

template <class T>
void TextModel<T>::lay_out(Arena<T>& a, int64_t B) {
  const int64_t N = cfg_.seq_len, M = N * B, D = cfg_.dim, V = cfg_.vocab_size, L = int64_t(layers_.size()),
                HNN = int64_t(cfg_.heads) * N * N;
  const bool train = a.training();
  x_.assign(L + 1, nullptr);
  for (int64_t l = 0; l < (train ? L + 1 : 2); ++l) a.global(&x_[l], M * D);
  for (auto [p, n] : {std::pair{&xf_, M * D},
                      {&meanf_, M},
                      {&rstdf_, M},
                      {&logits_, kMlmChunk * V},
                      {&rows_, kMlmChunk * D},
                      {&cls_logits_, B * std::max(1, cfg_.num_classes)}})
    a.global(p, n);
  if (rel_ >= 0) a.global(&bias_buf_, HNN);
  if (pads_masked()) a.global(&key_bias_, M);
  if (train) {
    for (auto [p, n] : {std::pair{&dxf_, M * D}, {&dX_, M * D}, {&drows_, kMlmChunk * D}}) a.global(p, n);
    if (rel_ >= 0) a.global(&dbias_buf_, HNN);
  }
  for (const auto& layer : layers_) layer->lay_out(a, B);
  ids_.assign(size_t(M), 0);
  segs_.assign(seg_ >= 0 ? size_t(M) : 0, 0);
  pads_.assign(pads_masked() ? size_t(M) : 0, 0);
}

template <class T>
const T* TextModel<T>::encode(const int32_t* ids, int64_t B, Rng* rng) {
  GMLP_CHECK(B > 0 && B <= this->chunk_batch_);
  this->batch_ = B;
  const int64_t N = cfg_.seq_len, M = N * B, D = cfg_.dim, V = cfg_.vocab_size, L = int64_t(layers_.size());
  const bool train = this->mode_ == Mode::train;
  auto stream = [&](int64_t l) { return train ? x_[l] : x_[l % 2]; };
  const T* w = this->w_.data();
  for (int64_t i = 0; i < M; ++i)
    if (ids[i] < 0 || ids[i] >= V) fail("token id ", ids[i], " at position ", i, " is outside the vocabulary of ", V);
  std::copy(ids, ids + M, ids_.begin());
  if (seg_ >= 0)
    for (int64_t b = 0; b < B; ++b) {
      uint8_t s = 0;
      for (int64_t n = 0; n < N; ++n) {
        segs_[b * N + n] = s;
        if (ids[b * N + n] == text::Tokenizer::kSep) s = 1;
      }
    }
  {
    GMLP_PROFILE("fwd.embed");
    embedding_forward(stream(0), ids, seg_ >= 0 ? segs_.data() : nullptr, w + embed_, pos_ >= 0 ? w + pos_ : nullptr,
                      seg_ >= 0 ? w + seg_ : nullptr, N, B, D);
  }
  if (rel_ >= 0) {
    rel_bias_forward(bias_buf_, buckets_.data(), w + rel_, int64_t(cfg_.heads), N);
    score_bias_.bias = bias_buf_;
  }
  if (pads_masked()) {  // [PAD] (id 0) keys get -1e9: exp underflows to exactly 0
    for (int64_t i = 0; i < M; ++i) {
      pads_[size_t(i)] = ids[i] == text::Tokenizer::kPad;
      key_bias_[i] = pads_[size_t(i)] ? T(-1e9) : T(0);
    }
    score_bias_.key_bias = key_bias_;
    score_bias_.pad = pads_.data();
  }
  for (int64_t l = 0; l < L; ++l) layers_[l]->forward(stream(l + 1), stream(l), w, B, rng);
  GMLP_PROFILE("fwd.norm");
  layernorm_forward(xf_, D, meanf_, rstdf_, stream(L), D, w + norm_w_, w + norm_b_, M, D, T(cfg_.ln_eps));
  return xf_;
}

template <class T>
const T* TextModel<T>::mlm_logits(const int64_t* positions, int64_t count) {
  GMLP_CHECK(count >= 0 && count <= kMlmChunk);
  const int64_t N = cfg_.seq_len, B = this->batch_, D = cfg_.dim, V = cfg_.vocab_size;
  for (int64_t k = 0; k < count; ++k) {
    const int64_t p = positions[k];
    GMLP_CHECK(p >= 0 && p < B * N);
    const int64_t row = (p % N) * B + p / N;  // flat b·N + n → token-major n·B + b
    std::copy(xf_ + row * D, xf_ + (row + 1) * D, rows_ + k * D);
  }
  const T* w = this->w_.data();
  linear_forward(logits_, rows_, w + embed_, w + mlm_b_, count, D, V);  // tied: h · Eᵀ + b
  return logits_;
}

template <class T>
typename TextModel<T>::MlmResult TextModel<T>::mlm(const int64_t* positions, const int32_t* labels, int64_t count,
                                                   bool backward, const T* cls_dlogits, T weight) {
  const int64_t N = cfg_.seq_len, B = this->batch_, D = cfg_.dim, V = cfg_.vocab_size;
  MlmResult r;
  if (backward) {
    GMLP_CHECK(this->mode_ == Mode::train);
    std::fill(dxf_, dxf_ + N * B * D, T(0));
  }
  probs_.resize(size_t(kMlmChunk * V));
  std::vector<T>& probs = probs_;
  T* g = this->g_.data();
  const T* w = this->w_.data();
  for (int64_t c0 = 0; c0 < count; c0 += kMlmChunk) {
    GMLP_PROFILE("mlm_head");
    const int64_t rows = std::min(kMlmChunk, count - c0);
    const T* lg = mlm_logits(positions + c0, rows);
    for (int64_t k = 0; k < rows; ++k) {
      const int32_t y = labels[c0 + k];
      GMLP_CHECK(y >= 0 && y < V);
      const T* row = lg + k * V;
      int64_t above = 0;  // tokens ranked ahead of the label
      for (int64_t v = 0; v < V && above < 5; ++v) above += row[v] > row[y] || (row[v] == row[y] && v < y);
      r.correct += above == 0, r.top5 += above < 5;
    }
    r.loss_sum += double(cross_entropy_forward(probs.data(), lg, labels + c0, rows, V, T(0))) * rows;
    if (!backward) continue;
    // ∂(weight · mean over all count positions)/∂logits = weight (p − onehot)/count: the op
    // divides by rows.
    cross_entropy_backward(logits_, probs.data(), labels + c0, rows, V, T(0));
    const T scale = T(double(weight) * double(rows) / double(count));
    for (int64_t i = 0; i < rows * V; ++i) logits_[i] *= scale;
    linear_backward(drows_, g + embed_, g + mlm_b_, logits_, rows_, w + embed_, rows, D, V, Write::overwrite);
    for (int64_t k = 0; k < rows; ++k) {
      const int64_t p = positions[c0 + k], row = (p % N) * B + p / N;
      for (int64_t d = 0; d < D; ++d) dxf_[row * D + d] += drows_[k * D + d];
    }
  }
  if (backward && cls_dlogits) {
    GMLP_CHECK(cls_w_ >= 0);
    linear_backward(dxf_, g + cls_w_, g + cls_b_, cls_dlogits, xf_, w + cls_w_, B, D,
                    int64_t(cfg_.num_classes));  // adds to the [CLS] rows' masked-token gradient
  }
  if (backward && (count > 0 || cls_dlogits)) backward_encoder();
  return r;
}

template <class T>
const T* TextModel<T>::classify() {
  GMLP_CHECK(cls_w_ >= 0);
  const T* w = this->w_.data();
  // Token-major: the [CLS] (first) token's rows are the first B rows.
  linear_forward(cls_logits_, xf_, w + cls_w_, w + cls_b_, this->batch_, cfg_.dim, cfg_.num_classes);
  return cls_logits_;
}

template <class T>
void TextModel<T>::classify_backward(const T* dlogits) {
  GMLP_CHECK(cls_w_ >= 0 && this->mode_ == Mode::train);
  const int64_t B = this->batch_, N = cfg_.seq_len, D = cfg_.dim;
  T* g = this->g_.data();
  std::fill(dxf_, dxf_ + N * B * D, T(0));
  linear_backward(dxf_, g + cls_w_, g + cls_b_, dlogits, xf_, this->w_.data() + cls_w_, B, D, int64_t(cfg_.num_classes),
                  Write::overwrite);
  backward_encoder();
}

template <class T>
void TextModel<T>::backward_encoder() {
  const int64_t B = this->batch_, N = cfg_.seq_len, M = N * B, D = cfg_.dim, L = int64_t(layers_.size());
  const T* w = this->w_.data();
  T* g = this->g_.data();
  std::fill(dX_, dX_ + M * D, T(0));
  layernorm_backward(dX_, D, g + norm_w_, g + norm_b_, dxf_, D, x_[L], D, meanf_, rstdf_, w + norm_w_, M, D);
  if (rel_ >= 0) {
    std::fill(dbias_buf_, dbias_buf_ + int64_t(cfg_.heads) * N * N, T(0));
    score_bias_.dbias = dbias_buf_;
  }
  this->head_grads_ready();
  for (int64_t l = L - 1; l >= 0; --l) {
    layers_[l]->backward(dX_, x_[l], w, g, B);
    this->layer_grads_ready(size_t(l));
  }
  GMLP_PROFILE("bwd.embed");
  if (rel_ >= 0) rel_bias_backward(g + rel_, dbias_buf_, buckets_.data(), int64_t(cfg_.heads), N);
  embedding_backward(g + embed_, pos_ >= 0 ? g + pos_ : nullptr, seg_ >= 0 ? g + seg_ : nullptr, dX_, ids_.data(),
                     seg_ >= 0 ? segs_.data() : nullptr, N, B, D);
}

template <class T>
std::string TextModel<T>::emit(OnnxBuilder& g, const std::string& ids, TextHead head) const {
  const int64_t N = cfg_.seq_len;
  auto equals = [&](int32_t id) { return g.op("Equal", {ids, g.scalar_int(id)}); };  // (B, N) bool
  const onnx::Attribute to_int64 = onnx::attr("to", int64_t(onnx::DataType::int64));
  std::string x;
  {
    const OnnxBuilder::Scope scope(g, "embed");
    x = g.op("Gather", {g.param(embed_), ids});  // (B, N, D)
    if (pos_ >= 0) x = g.add(x, g.param(pos_));
    if (seg_ >= 0) {  // segment 1 after the first [SEP]: an exclusive running count of [SEP]s > 0
      const std::string seps = g.op("Cast", {equals(text::Tokenizer::kSep)}, {to_int64});
      const std::string before = g.op("CumSum", {seps, g.scalar_int(1)}, {onnx::attr("exclusive", int64_t(1))});
      const std::string seg = g.op("Cast", {g.op("Greater", {before, g.scalar_int(0)})}, {to_int64});
      x = g.add(x, g.op("Gather", {g.param(seg_), seg}));
    }
  }
  if (rel_ >= 0) {  // T5's bias of each (query, key) bucket and head: (H, N, N)
    const OnnxBuilder::Scope scope(g, "rel_bias");
    GMLP_CHECK(int64_t(buckets_.size()) == N * N);
    const std::vector<int64_t> buckets(buckets_.begin(), buckets_.end());
    const std::string bias = g.op("Gather", {g.param(rel_), g.ints(buckets, {N, N})});  // (N, N, H)
    g.share("score_bias", g.transpose(bias, {2, 0, 1}));
  }
  if (pads_masked()) {  // [PAD] keys: -1e9, as encode() adds
    const OnnxBuilder::Scope scope(g, "pad_mask");
    const std::string bias = g.op("Where", {equals(text::Tokenizer::kPad), g.scalar(-1e9f), g.scalar(0.f)});
    g.share("key_bias", g.op("Unsqueeze", {bias, g.ints({1, 2})}));  // (B, 1, 1, N)
    const std::string keep = g.op("Where", {equals(text::Tokenizer::kPad), g.scalar(0.f), g.scalar(1.f)});
    g.share("token_keep", g.op("Unsqueeze", {keep, g.ints({2})}));  // (B, N, 1)
  }
  for (size_t l = 0; l < layers_.size(); ++l) {
    const OnnxBuilder::Scope scope(g, "residual." + std::to_string(l));
    x = layers_[l]->emit(g, x);
  }
  x = g.layernorm(x, norm_w_, norm_b_, cfg_.ln_eps);
  if (head == TextHead::classifier) {
    GMLP_CHECK(cls_w_ >= 0);
    return g.linear(g.select(x, 1, 0), cls_w_, cls_b_);  // the [CLS] token's row: (B, K)
  }
  return g.linear(x, embed_, mlm_b_);  // tied to the embedding: (B, N, V)
}

template <class T>
double TextModel<T>::flops_per_sequence() const {
  double f = 0;
  for (const auto& layer : layers_) f += layer->flops_per_image();
  return f;
}

template class TextModel<float>;
template class TextModel<double>;

namespace {
// Copies the leading block of a row-major tensor of shape `from` into one of shape `to`
// (every to[k] <= from[k]).
void copy_leading_block(const float* src, const std::vector<int64_t>& from, float* dst,
                        const std::vector<int64_t>& to) {
  if (to.empty()) {
    *dst = *src;
    return;
  }
  int64_t src_stride = 1, dst_stride = 1;
  for (size_t k = 1; k < from.size(); ++k) src_stride *= from[k], dst_stride *= to[k];
  const std::vector<int64_t> from_rest(from.begin() + 1, from.end()), to_rest(to.begin() + 1, to.end());
  for (int64_t i = 0; i < to[0]; ++i)
    copy_leading_block(src + i * src_stride, from_rest, dst + i * dst_stride, to_rest);
}
}  // namespace

void copy_weights_to_length(const TextModel<float>& from, TextModel<float>& to,
                            const std::function<bool(const std::string&)>& skip) {
  const int64_t n0 = from.config().seq_len, n1 = to.config().seq_len;
  if (n1 > n0) fail("cannot copy a model of length ", n0, " into one of length ", n1, ": only to a shorter one");
  for (const ParamInfo& p : from.params()) {
    if (skip && skip(p.name)) continue;
    const ParamInfo& q = to.param(p.name);
    bool fits = q.shape.size() == p.shape.size();
    for (size_t k = 0; fits && k < p.shape.size(); ++k)
      fits = q.shape[k] == p.shape[k] || (p.shape[k] == n0 && q.shape[k] == n1);
    if (!fits) fail("tensor '", p.name, "' has another shape");
    copy_leading_block(from.weights() + p.offset, p.shape, to.weights() + q.offset, q.shape);
  }
}

std::vector<ParamInfo> param_table(const TextConfig& config) {
  return TextModel<float>(config, Storage::table_only).params();
}

}  // namespace gmlp
