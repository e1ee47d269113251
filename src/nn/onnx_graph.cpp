// The ONNX graph builder and the two whole-model exports (onnx_graph.h). The layers' own nodes
// are in their emit() methods (token_model.cpp, branches.cpp, cnn.cpp, text_model.cpp).
#include "nn/onnx_graph.h"

#include <cmath>

#include "core/error.h"
#include "gmlp/version.h"

namespace gmlp {

namespace {

template <class V>
std::string raw_bytes(const std::vector<V>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(V));
}

onnx::Tensor int64_tensor(const std::vector<int64_t>& v, const std::vector<int64_t>& dims) {
  onnx::Tensor t;
  t.type = onnx::DataType::int64;
  t.dims = dims;
  t.raw = raw_bytes(v);
  return t;
}

void check_opset(int opset) {
  if (opset < kMinOpset || opset > kMaxOpset)
    fail("invalid --opset ", opset, ": gmlp writes opsets ", kMinOpset, " to ", kMaxOpset);
}

// The oldest IR version that knows the opset (onnx.helper.VERSION_TABLE): what runtimes
// of that opset's time read.
int64_t ir_version(int opset) {
  if (opset <= 18) return 8;
  if (opset <= 20) return 9;
  if (opset <= 22) return 10;
  if (opset <= 24) return opset - 12;
  return 13;
}

onnx::Model wrap(onnx::Graph graph, int opset) {
  onnx::Model m;
  m.ir_version = ir_version(opset);
  m.opset = opset;
  m.producer_name = "gmlp";
  m.producer_version = GMLP_VERSION;
  m.graph = std::move(graph);
  return m;
}

}  // namespace

OnnxBuilder::OnnxBuilder(const std::vector<ParamInfo>& params, const float* weights, int opset)
    : params_(params), weights_(weights), opset_(opset), used_(params.size(), false) {
  check_opset(opset);
  for (size_t i = 0; i < params.size(); ++i) param_index_[params[i].offset] = i;
}

void OnnxBuilder::input(const std::string& name, onnx::DataType type, const std::vector<int64_t>& shape,
                        const std::string& doc) {
  onnx::ValueInfo v;
  v.name = name, v.type = type, v.doc = doc;
  for (int64_t d : shape) v.shape.push_back(d < 0 ? onnx::Dim{0, "batch"} : onnx::Dim{d, ""});
  graph_.inputs.push_back(v);
}

void OnnxBuilder::output(const std::string& value, const std::string& name, const std::vector<int64_t>& shape,
                         const std::string& doc) {
  op("Identity", {value});
  graph_.nodes.back().outputs = {name};
  graph_.nodes.back().name = name;
  onnx::ValueInfo v;
  v.name = name, v.type = onnx::DataType::float32, v.doc = doc;
  for (int64_t d : shape) v.shape.push_back(d < 0 ? onnx::Dim{0, "batch"} : onnx::Dim{d, ""});
  graph_.outputs.push_back(v);
}

std::string OnnxBuilder::param(int64_t offset) {
  const auto it = param_index_.find(offset);
  GMLP_CHECK(it != param_index_.end());
  const ParamInfo& p = params_[it->second];
  if (!used_[it->second]) {
    used_[it->second] = true;
    onnx::Tensor t;
    t.name = p.name;
    t.dims = p.shape;
    t.raw.assign(reinterpret_cast<const char*>(weights_ + p.offset), size_t(p.numel) * sizeof(float));
    graph_.initializers.push_back(std::move(t));
  }
  return p.name;
}

std::string OnnxBuilder::scalar(float v) {
  onnx::Tensor t;
  t.raw.assign(reinterpret_cast<const char*>(&v), sizeof v);
  return op("Constant", {}, {onnx::attr("value", std::move(t))});
}

std::string OnnxBuilder::scalar_int(int64_t v) {
  return op("Constant", {}, {onnx::attr("value", int64_tensor({v}, {}))});
}

std::string OnnxBuilder::ints(const std::vector<int64_t>& v) { return ints(v, {int64_t(v.size())}); }

std::string OnnxBuilder::ints(const std::vector<int64_t>& v, const std::vector<int64_t>& dims) {
  return op("Constant", {}, {onnx::attr("value", int64_tensor(v, dims))});
}

std::string OnnxBuilder::fresh(const std::string& type) {
  const std::string base = (scope_.empty() ? "" : scope_ + "/") + type;
  const int k = names_[base]++;
  return k == 0 ? base : base + "_" + std::to_string(k);
}

std::string OnnxBuilder::op(const std::string& type, const std::vector<std::string>& inputs,
                            std::vector<onnx::Attribute> attributes) {
  onnx::Node n;
  n.op_type = type;
  n.name = fresh(type);
  n.inputs = inputs;
  n.outputs = {n.name};
  n.attributes = std::move(attributes);
  graph_.nodes.push_back(std::move(n));
  return graph_.nodes.back().outputs[0];
}

std::string OnnxBuilder::reshape(const std::string& x, const std::vector<int64_t>& shape) {
  return op("Reshape", {x, ints(shape)});
}

std::string OnnxBuilder::transpose(const std::string& x, const std::vector<int64_t>& perm) {
  return op("Transpose", {x}, {onnx::attr("perm", perm)});
}

std::string OnnxBuilder::slice(const std::string& x, int64_t axis, int64_t begin, int64_t end) {
  return op("Slice", {x, ints({begin}), ints({end}), ints({axis})});
}

std::string OnnxBuilder::select(const std::string& x, int64_t axis, int64_t index) {
  return op("Gather", {x, scalar_int(index)}, {onnx::attr("axis", axis)});
}

std::string OnnxBuilder::reduce_mean(const std::string& x, int64_t axis, bool keepdims) {
  if (opset_ >= 18) return op("ReduceMean", {x, ints({axis})}, {onnx::attr("keepdims", int64_t(keepdims))});
  return op("ReduceMean", {x},
            {onnx::attr("axes", std::vector<int64_t>{axis}), onnx::attr("keepdims", int64_t(keepdims))});
}

std::string OnnxBuilder::reduce_sum(const std::string& x, int64_t axis, bool keepdims) {
  return op("ReduceSum", {x, ints({axis})}, {onnx::attr("keepdims", int64_t(keepdims))});
}

namespace {
// "blocks.0.mlp_channels.fc1.weight" → "blocks.0.mlp_channels.fc1": a layer's scope.
std::string module_of(const std::string& param) { return param.substr(0, param.rfind('.')); }
}  // namespace

std::string OnnxBuilder::linear(const std::string& x, int64_t w, int64_t b) {
  const std::string wname = param(w);
  const Scope scope(*this, module_of(wname));
  const std::string y = op("MatMul", {x, transpose(wname, {1, 0})});
  return b < 0 ? y : add(y, param(b));
}

std::string OnnxBuilder::mix_tokens(const std::string& x, int64_t w, int64_t b) {
  const std::string wname = param(w);
  const Scope scope(*this, module_of(wname));
  const std::string y = op("MatMul", {wname, x});         // (N', N) · (B, N, C) → (B, N', C)
  return add(y, op("Unsqueeze", {param(b), ints({1})}));  // b as (N', 1): one per token row
}

std::string OnnxBuilder::layernorm(const std::string& x, int64_t w, int64_t b, double eps) {
  const std::string wname = param(w);
  const Scope scope(*this, module_of(wname));
  return op("LayerNormalization", {x, wname, param(b)},
            {onnx::attr("axis", int64_t(-1)), onnx::attr("epsilon", float(eps))});
}

std::string OnnxBuilder::gelu(const std::string& x) {
  const std::string erf = op("Erf", {mul(x, scalar(float(1 / std::sqrt(2.0))))});
  return mul(mul(x, scalar(0.5f)), add(erf, scalar(1.f)));
}

std::string OnnxBuilder::attention(const std::string& qkv, int64_t N, int64_t heads, int64_t dh,
                                   const std::string& bias, const std::string& key_bias) {
  // (B, N, 3·heads·dh) → (3, B, heads, N, dh): q, k, v of every head.
  const std::string t = transpose(reshape(qkv, {0, N, 3, heads, dh}), {2, 0, 3, 1, 4});
  const std::string q = select(t, 0, 0), k = select(t, 0, 1), v = select(t, 0, 2);
  std::string s = mul(op("MatMul", {q, transpose(k, {0, 1, 3, 2})}), scalar(float(1 / std::sqrt(double(dh)))));
  if (!bias.empty()) s = add(s, bias);
  if (!key_bias.empty()) s = add(s, key_bias);
  const std::string p = op("Softmax", {s}, {onnx::attr("axis", int64_t(-1))});
  const std::string o = op("MatMul", {p, v});  // (B, heads, N, dh)
  return reshape(transpose(o, {0, 2, 1, 3}), {0, N, heads * dh});
}

std::string OnnxBuilder::shared(const std::string& key) const {
  const auto it = shared_.find(key);
  return it == shared_.end() ? "" : it->second;
}

onnx::Graph OnnxBuilder::finish(const std::string& name, const std::vector<std::string>& unused) {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (used_[i]) continue;
    bool allowed = false;
    for (const std::string& u : unused) allowed |= u == params_[i].name;
    if (!allowed)
      fail("failed to export the model to ONNX: parameter '", params_[i].name,
           "' is used by no node of the graph (a layer without its emit)");
  }
  graph_.name = name;
  return std::move(graph_);
}

// ---------------------------------------------------------------------------------------------
onnx::Model to_onnx(const Model<float>& model, int opset) {
  check_opset(opset);
  const ModelConfig& c = model.config();
  OnnxBuilder g(model.params(), model.weights(), opset);
  g.input("images", onnx::DataType::float32, {-1, c.in_chans, c.img_size, c.img_size},
          "images (batch, channels, height, width), float32, normalised as in training: (x/255 - mean) / std "
          "per channel (metadata 'mean', 'std')");
  const std::string logits = model.emit(g, "images");
  g.output(logits, "logits", {-1, c.num_classes}, "class logits (batch, classes)");
  return wrap(g.finish(model_kind_name(c.model)), opset);
}

onnx::Model to_onnx(const TextModel<float>& model, TextHead head, int opset) {
  check_opset(opset);
  const TextConfig& c = model.config();
  if (head == TextHead::classifier && c.num_classes == 0)
    fail("the text model has no classification head (num_classes is 0): export its masked-language head");
  OnnxBuilder g(model.params(), model.weights(), opset);
  g.input("ids", onnx::DataType::int64, {-1, c.seq_len},
          "token ids (batch, sequence), int64, of the checkpoint's tokenizer: [CLS] = 2 first, "
          "[PAD] = 0 after the end");
  const std::string logits = model.emit(g, "ids", head);
  if (head == TextHead::mlm)
    g.output(logits, "logits", {-1, c.seq_len, c.vocab_size},
             "vocabulary logits at every position (batch, sequence, vocabulary)");
  else
    g.output(logits, "logits", {-1, c.num_classes}, "class logits from the [CLS] token (batch, classes)");
  std::vector<std::string> unused;  // the other head's own parameters
  if (head == TextHead::mlm && c.num_classes > 0) unused = {"cls_head.weight", "cls_head.bias"};
  if (head == TextHead::classifier) unused = {"mlm_bias"};
  return wrap(g.finish(std::string("text_") + model_kind_name(c.model), unused), opset);
}

}  // namespace gmlp
