// Whole-file reads and crash-safe writes: a write goes to a temporary file in the same folder,
// is flushed and fsync'ed, then rename()d over the target, so readers see the old file or the
// new one, never half of one (POSIX rename(2) is atomic within a file system).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gmlp {

// Writes `bytes` to `path + ".tmp.<pid>"`, fsyncs it and renames it to `path`. On failure the
// temporary file is removed and gmlp::Error names the path and the system's reason.
void write_file_atomic(const std::string& path, std::string_view bytes);

// Returns the contents of the regular file `path`. Throws "failed to read '<path>': <reason>"
// if it is missing, not a regular file, larger than `max_bytes` (checked before allocating),
// or a read fails.
std::string read_file(const std::string& path, size_t max_bytes);

}  // namespace gmlp
