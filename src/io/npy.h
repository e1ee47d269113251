// Writing NumPy .npy files (format version 1.0, numpy.lib.format), for inspecting tensors in
// Python with numpy.load.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gmlp {

// Writes numel(shape) floats from `data` as '<f4' in C order, atomically (write_file_atomic).
// The header is padded with spaces so the data starts at a multiple of 64 bytes.
void save_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape);

}  // namespace gmlp
