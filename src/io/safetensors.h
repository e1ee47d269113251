// Reading and writing the safetensors format (huggingface/safetensors, docs "Format"): an 8-byte
// little-endian header length N, N bytes of JSON {"name": {"dtype", "shape", "data_offsets"},
// "__metadata__": {str: str}}, then the byte buffer that the offsets index. Every header field is
// validated at open, before any size from it is trusted.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gmlp::st {

enum class Dtype { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

const char* dtype_name(Dtype dtype);  // "F32", as in the header
size_t dtype_size(Dtype dtype);       // bytes per element

struct TensorInfo {
  std::string name;
  Dtype dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;  // byte range in the data buffer (after the header)
  int64_t numel() const;
};

// A whole safetensors file held in memory; the header is fully validated by open().
class File {
 public:
  // Throws gmlp::Error "failed to load '<path>': <what was expected, what was found>".
  static File open(const std::string& path);
  // The same from a file's bytes already in memory; `name` stands for the path in errors.
  static File parse(std::string bytes, const std::string& name);

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in data-offset order
  const TensorInfo* find(const std::string& name) const;               // nullptr if absent

  // The tensor converted to float (from any dtype; BOOL gives 0/1). Throws gmlp::Error if it is
  // missing or, given expect_shape, if its shape differs.
  std::vector<float> read_f32(const std::string& name) const;
  std::vector<float> read_f32(const std::string& name, const std::vector<int64_t>& expect_shape) const;
  std::vector<double> read_f64(const std::string& name) const;
  std::vector<int64_t> read_i64(const std::string& name) const;  // from I64, I32 or U8 only

 private:
  const TensorInfo& get(const std::string& name) const;
  template <class T>
  std::vector<T> convert(const TensorInfo& t) const;

  std::string path_;
  std::string bytes_;      // the whole file
  size_t data_start_ = 0;  // 8 + N
  std::map<std::string, std::string> metadata_;
  std::vector<TensorInfo> tensors_;
};

struct Entry {
  std::string name;
  std::vector<int64_t> shape;
  const float* data;  // numel(shape) floats, written as F32
};

// Writes tensors in the given order (header keys too) with write_file_atomic. The header JSON is
// padded with spaces to a multiple of 8 bytes, as the reference implementation does; empty
// metadata is omitted. Throws gmlp::Error on a duplicate name, a negative dim or an I/O failure.
void save(const std::string& path, const std::vector<Entry>& tensors,
          const std::map<std::string, std::string>& metadata);

std::string shape_str(const std::vector<int64_t>& shape);  // "[49, 49]"; "[]" for a scalar

}  // namespace gmlp::st
