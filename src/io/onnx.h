// Writing ONNX models (onnx/onnx.proto, IR version 8 and later): the messages a feed-forward
// graph needs (ModelProto, GraphProto, NodeProto, TensorProto, ValueInfoProto, AttributeProto,
// OperatorSetIdProto, StringStringEntryProto) as plain structs, and their protobuf encoding
// (varints, length-delimited fields; initializer data as raw little-endian bytes). Nothing is
// read back: onnx.checker, ONNX Runtime and OpenVINO judge the files (tests/onnx_export_test.py).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gmlp::onnx {

// TensorProto.DataType.
enum class DataType : int32_t { float32 = 1, int32 = 6, int64 = 7, boolean = 9 };

struct Tensor {
  std::string name;
  DataType type = DataType::float32;
  std::vector<int64_t> dims;
  std::string raw;  // the elements, little-endian, row-major
};

struct Attribute {
  enum class Kind { f = 1, i = 2, s = 3, t = 4, ints = 7 };  // AttributeProto.AttributeType
  std::string name;
  Kind kind = Kind::i;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::vector<int64_t> ints;
};
Attribute attr(const std::string& name, int64_t v);
Attribute attr(const std::string& name, float v);
Attribute attr(const std::string& name, const std::string& v);
Attribute attr(const std::string& name, std::vector<int64_t> v);
Attribute attr(const std::string& name, Tensor v);

struct Node {
  std::string op_type, name;
  std::vector<std::string> inputs, outputs;
  std::vector<Attribute> attributes;
};

// A tensor dimension: a fixed size, or a symbolic one (param non-empty), e.g. "batch".
struct Dim {
  int64_t value = 0;
  std::string param;
};

struct ValueInfo {
  std::string name;
  DataType type = DataType::float32;
  std::vector<Dim> shape;
  std::string doc;
};

struct Graph {
  std::string name, doc;
  std::vector<Node> nodes;  // in topological order
  std::vector<Tensor> initializers;
  std::vector<ValueInfo> inputs, outputs;
};

struct Model {
  int64_t ir_version = 8;
  int64_t opset = 17;  // of the default domain ("ai.onnx")
  std::string producer_name, producer_version, doc;
  Graph graph;
  std::vector<std::pair<std::string, std::string>> metadata;  // metadata_props
};

// Protobuf's limit on one message: larger files need external data, which this writer lacks.
inline constexpr int64_t kMaxBytes = (int64_t{1} << 31) - 1;

// The ModelProto's bytes. Throws gmlp::Error if they would exceed kMaxBytes.
std::string serialize(const Model& model);
// serialize(), written atomically (write_file_atomic).
void save(const std::string& path, const Model& model);

}  // namespace gmlp::onnx
