// Masked-language models over token ids, sharing the vision models' residual sublayers and
// branches (token_model.h, branches.h): gMLP (no position information at all), aMLP (its tiny
// attention in the gate), and the BERT-style Transformer baseline with learned absolute
// positions ("bert") or T5 relative position biases ("bert_rel"). Pre-LayerNorm blocks, a final
// LayerNorm, and two heads on the last layer:
//   MLM              logits = h · Eᵀ + b, the output projection tied to the token embedding E
//   classification   logits = W · h_[CLS] + c, from the first token's representation
// With `segments`, every model adds BERT's segment embedding to the tokens': row 0 up to and
// including the first [SEP] of a sequence, row 1 after it ("[CLS] A [SEP] B [SEP]" marks B).
// Activations are token-major (N, B, D) as everywhere; ids are (B, N) row-major as stored.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nn/branches.h"
#include "nn/model.h"
#include "nn/model_kind.h"
#include "nn/token_model.h"

namespace gmlp {

struct TextConfig {
  ModelKind model = ModelKind::gmlp;  // a text kind: gmlp, amlp, bert, bert_rel (nn/model_kind.h)
  int vocab_size = 8000;              // V
  int seq_len = 128;                  // N
  int depth = 4;                      // L
  int dim = 256;                      // D
  int ffn = 1024;                     // F: gMLP's d_ffn; the Transformer's MLP width
  int heads = 4;                      // bert, bert_rel
  int attn_dim = 64;                  // amlp: the tiny attention's width
  std::string gate = "split";         // gmlp/amlp gating: split, multiplicative, additive, linear
  int num_classes = 0;                // > 0: a classification head on [CLS]
  bool pad_mask = true;               // bert, bert_rel: attention ignores [PAD] keys (id 0)
  // gmlp, amlp: [PAD] tokens are left out of the spatial gating unit's token mix (and are no keys
  // of aMLP's tiny attention), so a text's outputs do not depend on the padding after it. A config
  // without the field (a checkpoint from before it) reads false: trained with padding mixed in.
  bool gate_pad_mask = true;
  bool segments = false;       // BERT's segment (token-type) embedding: 0 up to the first [SEP], 1 after
  int rel_buckets = 32;        // bert_rel: T5 bidirectional buckets ...
  int rel_max_distance = 128;  // ... and the distance where the log-spaced buckets end
  double drop_path = 0;
  double ln_eps = 1e-6;
  double gate_eps = 1e-5;

  void validate() const;  // throws gmlp::Error naming the field
  nlohmann::json to_json() const;
  static TextConfig from_json(const nlohmann::json& j);
};

// Text presets: the models of the language tables at a few million parameters (most of them
// the 8000 × 256 embedding), with their training defaults.
struct TextPreset {
  std::string name, description;
  TextConfig config;
  int epochs = 10, batch_size = 32;
  double lr = 1e-3;
};
const std::vector<TextPreset>& text_presets();
const TextPreset& find_text_preset(const std::string& name);  // throws listing the names

// T5's bidirectional relative-position bucket of key j for query i (relative position j − i):
// half the buckets for each direction, exact up to buckets/4, then log-spaced to max_distance.
int t5_bucket(int relative_position, int num_buckets, int max_distance);

// Which head of a text model ends an exported graph: the vocabulary logits at every position, or
// the classification head on [CLS].
enum class TextHead { mlm, classifier };

template <class T>
class TextModel final : public ParamModel<T> {
 public:
  explicit TextModel(const TextConfig& config, Storage storage = Storage::allocate);
  const TextConfig& config() const { return cfg_; }
  void init(Rng& rng) override;

  // Runs the encoder on ids (B, N) (B ≤ the planned batch); rng non-null: training (drop path).
  // Returns the final-LayerNorm output (N, B, D).
  const T* encode(const int32_t* ids, int64_t B, Rng* rng = nullptr);

  struct MlmResult {
    double loss_sum = 0;  // Σ cross-entropy over the positions
    int64_t correct = 0;  // arg-max hits
    int64_t top5 = 0;     // labels among the 5 highest logits (ties: the lower id first)
  };
  // Masked-token cross-entropy at `count` positions (flat b·N + n) of the last encode against
  // their labels, logits formed a chunk of rows at a time. With backward, accumulates the
  // gradient of the MEAN loss into every parameter (the encoder included). With backward and
  // cls_dlogits (B, K), the gradient of a classification loss on [CLS] (BERT's next-sentence
  // objective, classify() of the same encode) is added too, through one encoder backward.
  // weight scales the masked-token gradient (finetuning keeps that loss as a weighted auxiliary);
  // loss_sum stays unweighted.
  MlmResult mlm(const int64_t* positions, const int32_t* labels, int64_t count, bool backward,
                const T* cls_dlogits = nullptr, T weight = T(1));
  // The vocabulary logits (count ≤ kMlmChunk rows) at positions of the last encode.
  const T* mlm_logits(const int64_t* positions, int64_t count);
  static constexpr int64_t kMlmChunk = 256;

  // Classification logits (B, K) from the last encode's [CLS] rows; backward accumulates.
  const T* classify();
  void classify_backward(const T* dlogits);

  // Multiply-adds ×2 of the encoder per sequence (the heads excluded).
  double flops_per_sequence() const;

  // The eval-mode forward pass as ONNX nodes (nn/onnx_graph.h): ids (B, N) int64 → returns the
  // logits' value of `head` (TextHead: mlm (B, N, V), classifier (B, K)).
  std::string emit(OnnxBuilder& g, const std::string& ids, TextHead head) const;

 protected:
  void lay_out(Arena<T>& arena, int64_t max_batch) override;

 private:
  void backward_encoder();  // from dXf_ (∂L/∂ final LayerNorm output) to the embeddings
  bool pads_masked() const {
    const ModelKindInfo& kind = model_kind_info(cfg_.model);
    return kind.self_attention ? cfg_.pad_mask : kind.gated && cfg_.gate_pad_mask;
  }

  TextConfig cfg_;
  std::vector<std::unique_ptr<Residual<T>>> layers_;
  SharedScoreBias<T> score_bias_;
  std::vector<int32_t> buckets_;  // bert_rel: (N, N) bucket of each (query, key)
  int64_t embed_ = 0, pos_ = -1, seg_ = -1, rel_ = -1, norm_w_ = 0, norm_b_ = 0, mlm_b_ = 0;
  int64_t cls_w_ = -1, cls_b_ = -1;

  std::vector<int32_t> ids_;   // the last encode's ids, for the embedding's backward
  std::vector<uint8_t> segs_;  // with segments: the last encode's segment of each (b, n)
  std::vector<uint8_t> pads_;  // with a padding mask: 1 where the last encode's (b, n) is [PAD]
  std::vector<T> probs_;       // the MLM head's softmax, one chunk
  T *xf_ = nullptr, *meanf_ = nullptr, *rstdf_ = nullptr, *logits_ = nullptr, *rows_ = nullptr;
  T *cls_logits_ = nullptr, *bias_buf_ = nullptr, *dbias_buf_ = nullptr, *key_bias_ = nullptr;
  std::vector<T*> x_;
  T *dxf_ = nullptr, *dX_ = nullptr, *drows_ = nullptr;
};

// Copies the weights of `from` into `to`, a model for the same or a shorter seq_len: every
// length-sized axis (gMLP's spatial W and bias, BERT's positions) keeps its leading block, so the
// first tokens see what they saw. Tensors of `from` that `skip` names are left out; the others
// must be in `to` with the same shape up to length, else gmlp::Error names the tensor.
void copy_weights_to_length(const TextModel<float>& from, TextModel<float>& to,
                            const std::function<bool(const std::string&)>& skip = {});

// The parameters a text model of `config` has (names, shapes, sizes), from a model built with
// Storage::table_only: validates the config and its size, allocates no weights.
std::vector<ParamInfo> param_table(const TextConfig& config);

}  // namespace gmlp
