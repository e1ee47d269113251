// Protobuf encoding (protobuf.dev, "Encoding") of the ONNX messages in onnx.h, with the field
// numbers of onnx/onnx.proto. Each message is encoded into a string of its own and embedded in
// its parent as a length-delimited field. Repeated scalars are written unpacked, as onnx.proto
// (proto2) declares them; a parser accepts either form.
#include "io/onnx.h"

#include <bit>
#include <cstring>

#include "core/error.h"
#include "io/atomic_file.h"

namespace gmlp::onnx {

static_assert(std::endian::native == std::endian::little, "raw_data is little-endian");

Attribute attr(const std::string& name, int64_t v) {
  Attribute a;
  a.name = name, a.kind = Attribute::Kind::i, a.i = v;
  return a;
}
Attribute attr(const std::string& name, float v) {
  Attribute a;
  a.name = name, a.kind = Attribute::Kind::f, a.f = v;
  return a;
}
Attribute attr(const std::string& name, const std::string& v) {
  Attribute a;
  a.name = name, a.kind = Attribute::Kind::s, a.s = v;
  return a;
}
Attribute attr(const std::string& name, std::vector<int64_t> v) {
  Attribute a;
  a.name = name, a.kind = Attribute::Kind::ints, a.ints = std::move(v);
  return a;
}
Attribute attr(const std::string& name, Tensor v) {
  Attribute a;
  a.name = name, a.kind = Attribute::Kind::t, a.t = std::move(v);
  return a;
}

namespace {

enum Wire { kVarint = 0, kLengthDelimited = 2, kFixed32 = 5 };

// One message's bytes, appended field by field.
class Message {
 public:
  void varint(int field, uint64_t v) {
    tag(field, kVarint);
    put_varint(v);
  }
  // int64 and enum fields: a negative value is its two's complement as a 10-byte varint.
  void int64(int field, int64_t v) { varint(field, uint64_t(v)); }
  void fixed32(int field, float v) {
    tag(field, kFixed32);
    char b[4];
    std::memcpy(b, &v, 4);
    out_.append(b, 4);
  }
  void bytes(int field, const std::string& v) {
    tag(field, kLengthDelimited);
    put_varint(v.size());
    out_ += v;
  }
  void message(int field, const Message& m) { bytes(field, m.out_); }
  const std::string& str() const { return out_; }

 private:
  void tag(int field, Wire wire) { put_varint(uint64_t(field) << 3 | wire); }
  void put_varint(uint64_t v) {
    while (v >= 0x80) {
      out_ += char((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out_ += char(v);
  }
  std::string out_;
};

Message encode(const Tensor& t) {  // TensorProto
  Message m;
  for (int64_t d : t.dims) m.int64(1, d);
  m.int64(2, int64_t(t.type));
  m.bytes(8, t.name);
  m.bytes(9, t.raw);
  return m;
}

Message encode(const Attribute& a) {  // AttributeProto
  Message m;
  m.bytes(1, a.name);
  m.int64(20, int64_t(a.kind));
  switch (a.kind) {
    case Attribute::Kind::f: m.fixed32(2, a.f); break;
    case Attribute::Kind::i: m.int64(3, a.i); break;
    case Attribute::Kind::s: m.bytes(4, a.s); break;
    case Attribute::Kind::t: m.message(5, encode(a.t)); break;
    case Attribute::Kind::ints:
      for (int64_t v : a.ints) m.int64(8, v);
      break;
  }
  return m;
}

Message encode(const Node& n) {  // NodeProto
  Message m;
  for (const std::string& s : n.inputs) m.bytes(1, s);
  for (const std::string& s : n.outputs) m.bytes(2, s);
  m.bytes(3, n.name);
  m.bytes(4, n.op_type);
  for (const Attribute& a : n.attributes) m.message(5, encode(a));
  return m;
}

Message encode(const ValueInfo& v) {  // ValueInfoProto
  Message shape;                      // TensorShapeProto
  for (const Dim& d : v.shape) {
    Message dim;  // TensorShapeProto.Dimension
    if (d.param.empty())
      dim.int64(1, d.value);
    else
      dim.bytes(2, d.param);
    shape.message(1, dim);
  }
  Message tensor;  // TypeProto.Tensor
  tensor.int64(1, int64_t(v.type));
  tensor.message(2, shape);
  Message type;  // TypeProto
  type.message(1, tensor);
  Message m;
  m.bytes(1, v.name);
  m.message(2, type);
  if (!v.doc.empty()) m.bytes(3, v.doc);
  return m;
}

Message encode(const Graph& g) {  // GraphProto
  Message m;
  for (const Node& n : g.nodes) m.message(1, encode(n));
  m.bytes(2, g.name);
  for (const Tensor& t : g.initializers) m.message(5, encode(t));
  if (!g.doc.empty()) m.bytes(10, g.doc);
  for (const ValueInfo& v : g.inputs) m.message(11, encode(v));
  for (const ValueInfo& v : g.outputs) m.message(12, encode(v));
  return m;
}

}  // namespace

std::string serialize(const Model& model) {
  int64_t weights = 0;
  for (const Tensor& t : model.graph.initializers) weights += int64_t(t.raw.size());
  if (weights > kMaxBytes)
    fail("the model's weights take ", weights, " bytes, more than the ", kMaxBytes,
         " one ONNX file (a protobuf message) may hold");
  Message m;  // ModelProto
  m.int64(1, model.ir_version);
  m.bytes(2, model.producer_name);
  m.bytes(3, model.producer_version);
  if (!model.doc.empty()) m.bytes(6, model.doc);
  m.message(7, encode(model.graph));
  Message opset;  // OperatorSetIdProto: the default domain is the empty string
  opset.int64(2, model.opset);
  m.message(8, opset);
  for (const auto& [key, value] : model.metadata) {
    Message entry;  // StringStringEntryProto
    entry.bytes(1, key);
    entry.bytes(2, value);
    m.message(14, entry);
  }
  if (int64_t(m.str().size()) > kMaxBytes)
    fail("the ONNX model takes ", m.str().size(), " bytes, more than the ", kMaxBytes,
         " one ONNX file (a protobuf message) may hold");
  return m.str();
}

void save(const std::string& path, const Model& model) { write_file_atomic(path, serialize(model)); }

}  // namespace gmlp::onnx
