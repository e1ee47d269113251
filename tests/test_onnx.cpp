// The ONNX writer's bytes, and every model kind's export: its initializers are exactly the
// model's parameters, by name, shape and value. That the graphs compute gmlp's logits is checked
// by ONNX Runtime and OpenVINO in tests/onnx_export_test.py.
#include <gtest/gtest.h>

#include <set>

#include "files.h"
#include "io/onnx.h"
#include "nn/model.h"
#include "nn/onnx_graph.h"
#include "nn/text_model.h"

namespace gmlp {
namespace {

std::string bytes(std::initializer_list<int> v) {
  std::string s;
  for (int b : v) s += char(b);
  return s;
}

// Every field kind of the encoding, against bytes worked out by hand from the protobuf rules:
// tag = field << 3 | wire type; a negative int64 is a 10-byte varint; field 20's tag needs two
// bytes; a float is 4 little-endian bytes.
TEST(OnnxWriter, EncodesFieldsAsProtobufDoes) {
  onnx::Model m;
  m.ir_version = 8, m.opset = 17, m.producer_name = "g", m.producer_version = "1";
  m.graph.name = "x";
  onnx::Node n;
  n.op_type = "Softmax", n.name = "s", n.inputs = {"a"}, n.outputs = {"b"};
  n.attributes = {onnx::attr("axis", int64_t(-1)), onnx::attr("epsilon", 1.0f)};
  m.graph.nodes.push_back(n);
  const std::string axis = bytes({0x0a, 4}) + "axis" + bytes({0xa0, 0x01, 2}) +
                           bytes({0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01});
  const std::string epsilon = bytes({0x0a, 7}) + "epsilon" + bytes({0xa0, 0x01, 1}) + bytes({0x15, 0, 0, 0x80, 0x3f});
  const std::string node = bytes({0x0a, 1}) + "a" + bytes({0x12, 1}) + "b" + bytes({0x1a, 1}) + "s" + bytes({0x22, 7}) +
                           "Softmax" + bytes({0x2a, int(axis.size())}) + axis + bytes({0x2a, int(epsilon.size())}) +
                           epsilon;
  const std::string graph = bytes({0x0a, int(node.size())}) + node + bytes({0x12, 1}) + "x";
  const std::string expected = bytes({0x08, 8, 0x12, 1}) + "g" + bytes({0x1a, 1}) + "1" +
                               bytes({0x3a, int(graph.size())}) + graph + bytes({0x42, 2, 0x10, 17});
  EXPECT_EQ(onnx::serialize(m), expected);
}

// A tensor of 200 bytes: its length prefix is a two-byte varint (200 = 0xc8 0x01).
TEST(OnnxWriter, LengthsOver127TakeTwoBytes) {
  onnx::Model m;
  onnx::Tensor t;
  t.name = "w", t.dims = {50}, t.raw = std::string(200, '\x01');
  m.graph.initializers.push_back(t);
  const std::string s = onnx::serialize(m);
  const std::string tensor = bytes({0x08, 50, 0x10, 1, 0x42, 1}) + "w" + bytes({0x4a, 0xc8, 0x01}) + t.raw;
  EXPECT_NE(s.find(bytes({0x2a, int(tensor.size() & 0x7f) | 0x80, int(tensor.size() >> 7)}) + tensor),
            std::string::npos);
}

ModelConfig tiny(ModelKind kind, const std::string& gate) {
  ModelConfig c;
  c.model = kind, c.gate = gate;
  c.img_size = 8, c.in_chans = 2, c.patch_size = 2, c.depth = 2, c.dim = 8, c.ffn = 12, c.num_classes = 3, c.heads = 2,
  c.token_ffn = 5, c.memory = 4, c.attn_dim = 4;
  if (kind == ModelKind::cnn) c.dim = 2, c.depth = 1;
  return c;
}

void expect_initializers_are_params(const onnx::Model& m, const std::vector<ParamInfo>& params, const float* w,
                                    const std::set<std::string>& unused) {
  std::set<std::string> seen;
  for (const onnx::Tensor& t : m.graph.initializers) {
    seen.insert(t.name);
    const ParamInfo* p = nullptr;
    for (const ParamInfo& q : params)
      if (q.name == t.name) p = &q;
    ASSERT_NE(p, nullptr) << "initializer '" << t.name << "' is no parameter";
    EXPECT_EQ(t.dims, p->shape) << t.name;
    EXPECT_EQ(t.type, onnx::DataType::float32) << t.name;
    EXPECT_EQ(t.raw, std::string(reinterpret_cast<const char*>(w + p->offset), size_t(p->numel) * 4)) << t.name;
  }
  for (const ParamInfo& p : params) EXPECT_EQ(seen.count(p.name), unused.count(p.name) ? 0u : 1u) << p.name;
}

// Every kind of the kinds table (and every gate) exports with every parameter in its graph:
// a kind added to the table without its nodes fails here.
TEST(OnnxExport, EveryImageKindUsesEveryParameter) {
  for (const ModelKind kind : model_kinds(Domain::vision))
    for (const std::string& gate : kGateKinds) {
      if (gate != "split" && !model_kind_info(kind).gated) continue;
      SCOPED_TRACE(model_kind_name(kind) + (":" + gate));
      auto model = make_model<float>(tiny(kind, gate));
      Rng rng(3);
      model->init(rng);
      const onnx::Model m = to_onnx(*model, kMinOpset);
      expect_initializers_are_params(m, model->params(), model->weights(), {});
      ASSERT_EQ(m.graph.inputs.size(), 1u);
      EXPECT_EQ(m.graph.inputs[0].name, "images");
      EXPECT_EQ(m.graph.inputs[0].shape[0].param, "batch");
      ASSERT_EQ(m.graph.outputs.size(), 1u);
      EXPECT_EQ(m.graph.outputs[0].shape[1].value, 3);
    }
}

TEST(OnnxExport, EveryTextKindUsesEveryParameterOfItsHead) {
  for (const ModelKind kind : model_kinds(Domain::text))
    for (const TextHead head : {TextHead::mlm, TextHead::classifier}) {
      SCOPED_TRACE(model_kind_name(kind) + std::string(head == TextHead::mlm ? " mlm" : " classifier"));
      TextConfig c;
      c.model = kind, c.vocab_size = 11, c.seq_len = 6, c.depth = 1, c.dim = 8, c.ffn = 12, c.heads = 2;
      c.attn_dim = 4, c.rel_buckets = 4, c.rel_max_distance = 8, c.num_classes = 2, c.segments = true;
      TextModel<float> model(c);
      Rng rng(5);
      model.init(rng);
      const onnx::Model m = to_onnx(model, head, kMaxOpset);
      const std::set<std::string> unused = head == TextHead::mlm
                                               ? std::set<std::string>{"cls_head.weight", "cls_head.bias"}
                                               : std::set<std::string>{"mlm_bias"};
      expect_initializers_are_params(m, model.params(), model.weights(), unused);
      EXPECT_EQ(m.graph.inputs[0].type, onnx::DataType::int64);
      EXPECT_EQ(m.graph.outputs[0].shape.size(), head == TextHead::mlm ? 3u : 2u);
    }
}

TEST(OnnxExport, RefusesWhatItCannotWrite) {
  auto model = make_model<float>(tiny(ModelKind::gmlp, "split"));
  test::expect_error([&] { to_onnx(*model, kMinOpset - 1); }, {"--opset 16", "17 to 25"});
  test::expect_error([&] { to_onnx(*model, kMaxOpset + 1); }, {"--opset 26"});
  TextConfig c;
  c.vocab_size = 11, c.seq_len = 6, c.depth = 1, c.dim = 8, c.ffn = 12;
  TextModel<float> text(c);
  test::expect_error([&] { to_onnx(text, TextHead::classifier, kMinOpset); }, {"no classification head"});
}

// A layer that forgets to emit a parameter's use fails the export, naming the parameter.
TEST(OnnxBuilder, FailsOnAParameterNoNodeUses) {
  std::vector<ParamInfo> params(2);
  params[0].name = "a.weight", params[0].shape = {2}, params[0].numel = 2, params[0].offset = 0;
  params[1].name = "b.weight", params[1].shape = {2}, params[1].numel = 2, params[1].offset = 2;
  const float w[4] = {1, 2, 3, 4};
  OnnxBuilder g(params, w, kMinOpset);
  g.input("x", onnx::DataType::float32, {-1, 2}, "");
  g.output(g.add("x", g.param(0)), "y", {-1, 2}, "");
  test::expect_error([&] { g.finish("t"); }, {"'b.weight'", "used by no node"});
}

}  // namespace
}  // namespace gmlp
