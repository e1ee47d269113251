// safetensors reader and writer (format: huggingface/safetensors README, "Format"). The header is
// validated field by field, with sizes checked for overflow before anything is allocated; tensor
// data is read element-wise with memcpy (the buffer need not be aligned). Little-endian hosts only.
#include "io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/bf16.h"
#include "core/error.h"
#include "io/atomic_file.h"

namespace gmlp::st {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

using nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
constexpr size_t kMaxFileBytes = size_t{1} << 36;  // 64 GiB: far beyond any model we train

struct DtypeDesc {
  Dtype dtype;
  const char* name;
  size_t size;
};
constexpr DtypeDesc kDtypes[] = {
    {Dtype::F64, "F64", 8}, {Dtype::F32, "F32", 4},   {Dtype::F16, "F16", 2}, {Dtype::BF16, "BF16", 2},
    {Dtype::I64, "I64", 8}, {Dtype::I32, "I32", 4},   {Dtype::I16, "I16", 2}, {Dtype::I8, "I8", 1},
    {Dtype::U8, "U8", 1},   {Dtype::BOOL, "BOOL", 1},
};

template <class... Args>
[[noreturn]] void bad(const std::string& path, Args&&... args) {
  fail("failed to load '", path, "': ", std::forward<Args>(args)...);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0) {  // zero or subnormal: man * 2^-24
    const float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  const uint32_t bits = exp == 31 ? sign | 0x7f800000u | (man << 13)           // inf or NaN
                                  : sign | ((exp + 112) << 23) | (man << 13);  // rebias 15 -> 127
  return std::bit_cast<float>(bits);
}

template <class S>
S load(const char* p) {
  S v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// out[i] = f(the i-th S stored at p), converted to T.
template <class S, class T, class F = std::identity>
void load_all(const char* p, size_t n, T* out, F f = {}) {
  // NOLINTNEXTLINE(bugprone-signed-char-misuse): an I8 tensor's bytes are signed values
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(f(load<S>(p + i * sizeof(S))));
}

// A short, non-recursive rendering of a header value for error messages: numbers as written,
// flat arrays element by element ("[2, <string>]"), anything else by its type ("<object>").
std::string describe(const json& v) {
  if (v.is_number()) return v.dump();
  if (!v.is_array()) return cat("<", v.type_name(), ">");
  if (v.size() > 16) return cat("<array of ", v.size(), " elements>");
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + (v[i].is_number() ? v[i].dump() : cat("<", v[i].type_name(), ">"));
  return s + "]";
}

// A JSON integer as uint64; false for non-integers and negatives (nlohmann parses every
// non-negative integer literal as number_unsigned).
bool get_u64(const json& v, uint64_t* out) {
  if (!v.is_number_unsigned()) return false;
  *out = v.get<uint64_t>();
  return true;
}

}  // namespace

const char* dtype_name(Dtype dtype) { return kDtypes[static_cast<int>(dtype)].name; }
size_t dtype_size(Dtype dtype) { return kDtypes[static_cast<int>(dtype)].size; }

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

File File::open(const std::string& path) { return parse(read_file(path, kMaxFileBytes), path); }

File File::parse(std::string bytes, const std::string& path) {
  File f;
  f.path_ = path;
  f.bytes_ = std::move(bytes);
  const std::string& b = f.bytes_;
  if (b.size() < 8) bad(path, "the file is ", b.size(), " bytes, shorter than the 8-byte header length field");
  const uint64_t n = load<uint64_t>(b.data());
  if (n > kMaxHeaderBytes)
    bad(path, "the header length field says ", n, " bytes, more than the limit of ", kMaxHeaderBytes,
        " (not a safetensors file?)");
  if (n > b.size() - 8)
    bad(path, "the header length field says ", n, " bytes but only ", b.size() - 8,
        " bytes follow it (truncated file?)");
  f.data_start_ = 8 + n;
  const uint64_t data_size = b.size() - f.data_start_;

  json header;
  try {
    header = json::parse(b.begin() + 8, b.begin() + f.data_start_);
  } catch (const json::parse_error& e) {
    bad(path, "the header is not valid JSON (error at byte ", std::min<uint64_t>(e.byte, n), " of ", n, ")");
  } catch (const json::out_of_range&) {  // e.g. 1e999
    bad(path, "the header is not valid JSON (a number is out of range)");
  } catch (const json::exception& e) {
    bad(path, "the header is not valid JSON (nlohmann::json error ", e.id, ")");
  }
  if (!header.is_object()) bad(path, "the header is a JSON ", header.type_name(), ", expected an object");

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object())
        bad(path, "\"__metadata__\" is a JSON ", entry.type_name(), ", expected an object of strings");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string())
          bad(path, "\"__metadata__\" value for '", k, "' is a JSON ", v.type_name(), ", expected a string");
        f.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object()) bad(path, "entry '", name, "' is a JSON ", entry.type_name(), ", expected an object");
    for (const char* key : {"dtype", "shape", "data_offsets"})
      if (!entry.contains(key)) bad(path, "tensor '", name, "' has no \"", key, "\" field");

    TensorInfo t;
    t.name = name;
    const json& dtype = entry["dtype"];
    if (!dtype.is_string())
      bad(path, "tensor '", name, "' has a \"dtype\" of JSON type ", dtype.type_name(), ", expected a string");
    const auto* desc = std::find_if(std::begin(kDtypes), std::end(kDtypes),
                                    [&](const DtypeDesc& d) { return dtype.get<std::string>() == d.name; });
    if (desc == std::end(kDtypes))
      bad(path, "tensor '", name, "' has unknown dtype '", dtype.get<std::string>(),
          "' (expected F64, F32, F16, BF16, I64, I32, I16, I8, U8 or BOOL)");
    t.dtype = desc->dtype;

    const json& shape = entry["shape"];
    if (!shape.is_array())
      bad(path, "tensor '", name, "' has a \"shape\" of JSON type ", shape.type_name(), ", expected an array");
    uint64_t numel = 1;
    bool overflow = false;
    for (const json& d : shape) {
      uint64_t dim;
      if (!get_u64(d, &dim)) {
        if (d.is_number_integer()) bad(path, "tensor '", name, "' has a negative dimension in shape ", describe(shape));
        bad(path, "tensor '", name, "' has shape ", describe(shape), ", expected an array of non-negative integers");
      }
      overflow |= dim > uint64_t(std::numeric_limits<int64_t>::max()) || __builtin_mul_overflow(numel, dim, &numel);
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    uint64_t nbytes = 0;
    overflow |=
        numel > uint64_t(std::numeric_limits<int64_t>::max()) || __builtin_mul_overflow(numel, desc->size, &nbytes);
    if (overflow)
      bad(path, "tensor '", name, "' has shape ", describe(shape), ", whose size in bytes overflows 64 bits");

    const json& offs = entry["data_offsets"];
    if (!offs.is_array() || offs.size() != 2 || !get_u64(offs[0], &t.begin) || !get_u64(offs[1], &t.end) ||
        t.begin > t.end)
      bad(path, "tensor '", name, "' has \"data_offsets\" ", describe(offs),
          ", expected [begin, end] with 0 <= begin <= end");
    if (t.end > data_size)
      bad(path, "tensor '", name, "' has data_offsets [", t.begin, ", ", t.end, "] past the end of the ", data_size,
          "-byte data buffer (truncated file?)");
    if (t.end - t.begin != nbytes)
      bad(path, "tensor '", name, "' has data_offsets [", t.begin, ", ", t.end, "] spanning ", t.end - t.begin,
          " bytes, expected ", nbytes, " for ", desc->name, " shape ", shape_str(t.shape));
    f.tensors_.push_back(std::move(t));
  }

  std::sort(f.tensors_.begin(), f.tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  for (size_t i = 1; i < f.tensors_.size(); ++i) {
    const TensorInfo &p = f.tensors_[i - 1], &t = f.tensors_[i];
    if (p.end > t.begin)
      bad(path, "tensors '", p.name, "' [", p.begin, ", ", p.end, "] and '", t.name, "' [", t.begin, ", ", t.end,
          "] overlap in the data buffer");
  }
  return f;
}

const TensorInfo* File::find(const std::string& name) const {
  for (const TensorInfo& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

const TensorInfo& File::get(const std::string& name) const {
  const TensorInfo* t = find(name);
  if (!t) bad(path_, "tensor '", name, "' not found (the file has ", tensors_.size(), " tensors)");
  return *t;
}

template <class T>
std::vector<T> File::convert(const TensorInfo& t) const {
  const size_t n = static_cast<size_t>(t.numel());
  const char* p = bytes_.data() + data_start_ + t.begin;
  std::vector<T> out(n);
  T* o = out.data();
  switch (t.dtype) {
    case Dtype::F64: load_all<double>(p, n, o); break;
    case Dtype::F32: load_all<float>(p, n, o); break;
    case Dtype::F16: load_all<uint16_t>(p, n, o, half_to_float); break;
    case Dtype::BF16: load_all<uint16_t>(p, n, o, bf16_to_float); break;
    case Dtype::I64: load_all<int64_t>(p, n, o); break;
    case Dtype::I32: load_all<int32_t>(p, n, o); break;
    case Dtype::I16: load_all<int16_t>(p, n, o); break;
    case Dtype::I8: load_all<int8_t>(p, n, o); break;
    case Dtype::U8: load_all<uint8_t>(p, n, o); break;
    case Dtype::BOOL: load_all<uint8_t>(p, n, o, [](uint8_t v) { return v != 0; }); break;
  }
  return out;
}

std::vector<float> File::read_f32(const std::string& name) const { return convert<float>(get(name)); }

std::vector<float> File::read_f32(const std::string& name, const std::vector<int64_t>& expect_shape) const {
  const TensorInfo& t = get(name);
  if (t.shape != expect_shape)
    bad(path_, "tensor '", name, "' has shape ", shape_str(t.shape), ", expected ", shape_str(expect_shape));
  return convert<float>(t);
}

std::vector<double> File::read_f64(const std::string& name) const { return convert<double>(get(name)); }

std::vector<int64_t> File::read_i64(const std::string& name) const {
  const TensorInfo& t = get(name);
  if (t.dtype != Dtype::I64 && t.dtype != Dtype::I32 && t.dtype != Dtype::U8)
    bad(path_, "tensor '", name, "' has dtype ", dtype_name(t.dtype), ", expected I64, I32 or U8");
  return convert<int64_t>(t);
}

void save(const std::string& path, const std::vector<Entry>& tensors,
          const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const Entry& e : tensors) {
    if (e.name == "__metadata__" || header.contains(e.name))
      fail("failed to save '", path, "': tensor name '", e.name, "' is used twice or reserved");
    int64_t numel = 1;
    for (int64_t d : e.shape) {
      if (d < 0) fail("failed to save '", path, "': tensor '", e.name, "' has negative shape ", shape_str(e.shape));
      numel *= d;
    }
    GMLP_CHECK(numel == 0 || e.data != nullptr);
    const uint64_t end = offset + uint64_t(numel) * sizeof(float);
    header[e.name] = {{"dtype", "F32"}, {"shape", e.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string json_text;
  try {
    json_text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // e.g. a name or metadata that is not UTF-8
    fail("failed to save '", path, "': cannot encode the header: ", e.what());
  }
  json_text.append((8 - json_text.size() % 8) % 8, ' ');

  std::string out;
  out.reserve(8 + json_text.size() + offset);
  const uint64_t n = json_text.size();
  out.append(reinterpret_cast<const char*>(&n), 8);
  out += json_text;
  for (const Entry& e : tensors) {
    int64_t numel = 1;
    for (int64_t d : e.shape) numel *= d;
    if (numel) out.append(reinterpret_cast<const char*>(e.data), size_t(numel) * sizeof(float));
  }
  write_file_atomic(path, out);
}

}  // namespace gmlp::st
