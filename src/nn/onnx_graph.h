// The models' eval-mode forward pass as an ONNX graph (io/onnx.h), for `gmlp export`. Each layer
// emits its own nodes beside its forward (Branch::emit, Residual::emit, Model::emit,
// TextModel::emit), on PyTorch's batch-major layout (B, N, D) rather than the engine's token-major
// one, through the builder below; its parameters become initializers named by their state_dict
// keys (timm's). Opset 17 and later: LayerNormalization is native, GELU is its erf formula.
//
//   onnx::Model m = to_onnx(model, 17);   // "images" (batch, C, S, S) → "logits" (batch, K)
//   onnx::save("model.onnx", m);
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/onnx.h"
#include "nn/model.h"
#include "nn/text_model.h"

namespace gmlp {

// The opsets gmlp writes. Every op the graphs use means the same from 17 to 25: the later
// versions add element types (bfloat16, float8, int4, float4) and Cast a rounding mode for
// float8; ReduceMean's axes move from an attribute to an input in 18, which the builder follows.
// 25 is the newest that the pinned ONNX Runtime and OpenVINO of the tests run.
inline constexpr int kMinOpset = 17, kMaxOpset = 25;

class OnnxBuilder {
 public:
  // params, weights: the model's table and flat weights (alive as long as the builder).
  OnnxBuilder(const std::vector<ParamInfo>& params, const float* weights, int opset);
  int opset() const { return opset_; }

  // The graph's input and output; a dim of -1 is the symbolic "batch".
  void input(const std::string& name, onnx::DataType type, const std::vector<int64_t>& shape, const std::string& doc);
  void output(const std::string& value, const std::string& name, const std::vector<int64_t>& shape,
              const std::string& doc);

  // The parameter at `offset` of the flat weights, as an initializer named by its state_dict key
  // (added on first use).
  std::string param(int64_t offset);
  // Constant nodes: a float scalar, an int64 scalar, an int64 vector, an int64 tensor.
  std::string scalar(float v);
  std::string scalar_int(int64_t v);
  std::string ints(const std::vector<int64_t>& v);
  std::string ints(const std::vector<int64_t>& v, const std::vector<int64_t>& dims);

  // One node (its outputs named after the scope and op type); returns its first output.
  std::string op(const std::string& type, const std::vector<std::string>& inputs,
                 std::vector<onnx::Attribute> attributes = {});

  // The layers the models share.
  std::string add(const std::string& a, const std::string& b) { return op("Add", {a, b}); }
  std::string mul(const std::string& a, const std::string& b) { return op("Mul", {a, b}); }
  // Shape as Reshape takes it: 0 keeps the input's dim (the batch), -1 is inferred.
  std::string reshape(const std::string& x, const std::vector<int64_t>& shape);
  std::string transpose(const std::string& x, const std::vector<int64_t>& perm);
  // x[..., begin:end] on `axis`.
  std::string slice(const std::string& x, int64_t axis, int64_t begin, int64_t end);
  // x.select(axis, index): the axis dropped.
  std::string select(const std::string& x, int64_t axis, int64_t index);
  std::string reduce_mean(const std::string& x, int64_t axis, bool keepdims);
  std::string reduce_sum(const std::string& x, int64_t axis, bool keepdims);
  // nn.Linear over the last axis: x·Wᵀ + b (b < 0: no bias). W: (out, in).
  std::string linear(const std::string& x, int64_t w, int64_t b);
  // Over the tokens: W·x + b per image, x (B, N, C), W (N', N), b (N'): a linear map that mixes
  // tokens (the SGU's, ResMLP's, the Mixer's token MLP), no transposes.
  std::string mix_tokens(const std::string& x, int64_t w, int64_t b);
  // nn.LayerNorm over the last axis.
  std::string layernorm(const std::string& x, int64_t w, int64_t b, double eps);
  // torch.nn.GELU(): x · ½ · (1 + erf(x/√2)), the engine's exact form.
  std::string gelu(const std::string& x);
  // Softmax attention on packed qkv (B, N, 3·heads·dh), timm's order (ops/attention.h); bias
  // (heads, N, N) and key_bias (B, 1, 1, N) are added to the scores when non-empty. Returns
  // (B, N, heads·dh).
  std::string attention(const std::string& qkv, int64_t N, int64_t heads, int64_t dh, const std::string& bias = "",
                        const std::string& key_bias = "");

  // Values a model makes once for all its layers (the attention's score biases), by key; "" if
  // not set.
  void share(const std::string& key, const std::string& value) { shared_[key] = value; }
  std::string shared(const std::string& key) const;

  // Names nodes made during its life "<prefix>/<Op>" (Netron shows the model's structure).
  class Scope {
   public:
    Scope(OnnxBuilder& g, const std::string& prefix) : g_(g), saved_(g.scope_) { g.scope_ = prefix; }
    ~Scope() { g_.scope_ = saved_; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    OnnxBuilder& g_;
    std::string saved_;
  };

  // The graph. Throws gmlp::Error naming the first parameter no node used, unless it is in
  // `unused`: a layer missing from the graph fails here rather than in the logits.
  onnx::Graph finish(const std::string& name, const std::vector<std::string>& unused = {});

 private:
  std::string fresh(const std::string& type);
  const std::vector<ParamInfo>& params_;
  const float* weights_;
  int opset_;
  std::string scope_;
  onnx::Graph graph_;
  std::map<int64_t, size_t> param_index_;  // offset → index in params_
  std::vector<bool> used_;
  std::map<std::string, int> names_;  // node name → times taken
  std::map<std::string, std::string> shared_;
};

// The image classifier: "images" (batch, C, S, S), float32, normalised as the model was trained
// → "logits" (batch, K). Throws gmlp::Error if opset is outside kMinOpset..kMaxOpset.
onnx::Model to_onnx(const Model<float>& model, int opset);
// The text model: "ids" (batch, N), int64 → "logits" (batch, N, V) or (batch, K). Throws if the
// classifier is asked of a model without one.
onnx::Model to_onnx(const TextModel<float>& model, TextHead head, int opset);

}  // namespace gmlp
