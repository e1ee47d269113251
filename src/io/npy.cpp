// NumPy .npy v1.0 writer (numpy.lib.format): magic "\x93NUMPY", version 1.0, a little-endian u16
// header length, a Python dict literal padded with spaces and ended by '\n' so that the data
// starts at a multiple of 64 bytes, then the raw little-endian float32 data.
#include "io/npy.h"

#include <bit>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"

namespace gmlp {

static_assert(std::endian::native == std::endian::little, "'<f4' is little-endian");

void save_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
  std::string dims;  // a Python tuple body: "2, 3", "5," or ""
  int64_t numel = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) fail("failed to save '", path, "': shape ", st::shape_str(shape), " has a negative dimension");
    dims += (i ? ", " : "") + std::to_string(shape[i]);
    numel *= shape[i];
  }
  if (shape.size() == 1) dims += ',';
  GMLP_CHECK(numel == 0 || data != nullptr);

  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  const size_t prefix = 10;  // magic (6) + version (2) + header length (2)
  header.append(63 - (prefix + header.size()) % 64, ' ');
  header += '\n';
  if (header.size() > 65535) fail("failed to save '", path, "': shape has too many dimensions for .npy v1.0");

  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  if (numel) out.append(reinterpret_cast<const char*>(data), size_t(numel) * sizeof(float));
  write_file_atomic(path, out);
}

}  // namespace gmlp
