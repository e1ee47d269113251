// Whole-file reads and crash-safe writes: a write goes to a temporary file in the same folder,
// is flushed and fsync'ed, then rename()d over the target and the folder fsync'ed, so readers see
// the old file or the new one, never half of one (POSIX rename(2) is atomic within a file
// system), and the new one survives a power cut once the call returns.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gmlp {

// Writes `bytes` to `path + ".tmp.<pid>"`, fsyncs it, renames it to `path` and fsyncs the folder.
// On failure the temporary file is removed and gmlp::Error names the path and the system's reason.
void write_file_atomic(const std::string& path, std::string_view bytes);

// rename(2) of `from` over `to`, checked: a failure is one gmlp::Error naming both.
void rename_file(const std::string& from, const std::string& to);

// fsync(2) of a folder, so that the files created, renamed or removed in it survive a power cut.
// A file system that cannot sync folders (EINVAL, ENOTSUP) is let be; another failure is a
// gmlp::Error.
void sync_folder(const std::string& dir);

// Returns the contents of the regular file `path`. Throws "failed to read '<path>': <reason>"
// if it is missing, not a regular file, larger than `max_bytes` (checked before allocating),
// or a read fails.
std::string read_file(const std::string& path, size_t max_bytes);

// The test hook behind the crash-safety tests of run folders (train/run_dir.h): inside a
// CrashTest scope, with GMLP_TEST_CRASH_AT=N in the environment, the N-th step of the process
// (counted over every scope) among write_file_atomic's write, fsync, rename and folder fsync,
// rename_file and sync_folder kills the process with SIGKILL before that step is taken (a write:
// after half of its bytes), as a kill -9 or a power cut at that instant would. Without the
// variable a scope costs nothing.
class CrashTest {
 public:
  CrashTest();
  ~CrashTest();
  CrashTest(const CrashTest&) = delete;
  CrashTest& operator=(const CrashTest&) = delete;
};

}  // namespace gmlp
