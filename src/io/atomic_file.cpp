// Whole-file reads and atomic writes with POSIX calls; every call is checked and a failure is
// one gmlp::Error sentence naming the path and strerror(errno).
#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace gmlp {

namespace {

// CrashTest's state: scopes open, the step to die at (0: none), steps counted so far.
int crash_scopes = 0;
long crash_at = 0, crash_steps = 0;

// Counts a step inside a CrashTest scope; true when it is the one to die at.
bool crash_due() { return crash_scopes > 0 && crash_at > 0 && ++crash_steps == crash_at; }

[[noreturn]] void crash_now() {
  std::raise(SIGKILL);
  _exit(137);  // not reached
}

void crash_point() {
  if (crash_due()) crash_now();
}

std::string parent_folder(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

}  // namespace

CrashTest::CrashTest() {
  if (crash_scopes++ > 0) return;
  const char* at = std::getenv("GMLP_TEST_CRASH_AT");
  crash_at = at ? std::strtol(at, nullptr, 10) : 0;
}

CrashTest::~CrashTest() { --crash_scopes; }

void write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::string tmp = cat(path, ".tmp.", getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail("failed to write '", path, "': cannot create '", tmp, "': ", std::strerror(errno));
  // Takes errno before cleanup can change it; closes (if still open) and removes the temp file.
  auto bail = [&](const char* step) {
    const int err = errno;
    if (f) std::fclose(f);
    std::remove(tmp.c_str());
    fail("failed to write '", path, "': ", step, " of '", tmp, "' failed: ", std::strerror(err));
  };
  if (crash_due()) {  // half the bytes on disk, then the end
    std::fwrite(bytes.data(), 1, bytes.size() / 2, f);
    std::fflush(f);
    crash_now();
  }
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) bail("write");
  if (std::fflush(f) != 0) bail("flush");
  crash_point();
  if (fsync(fileno(f)) != 0) bail("fsync");
  const int closed = std::fclose(f);
  f = nullptr;
  if (closed != 0) bail("close");
  crash_point();
  if (std::rename(tmp.c_str(), path.c_str()) != 0) bail("rename");
  sync_folder(parent_folder(path));
}

void rename_file(const std::string& from, const std::string& to) {
  crash_point();
  if (std::rename(from.c_str(), to.c_str()) != 0)
    fail("failed to rename '", from, "' to '", to, "': ", std::strerror(errno));
}

void sync_folder(const std::string& dir) {
  crash_point();
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("failed to sync folder '", dir, "': ", std::strerror(errno));
  const int synced = fsync(fd), err = errno;
  close(fd);
  if (synced != 0 && err != EINVAL && err != ENOTSUP) fail("failed to sync folder '", dir, "': ", std::strerror(err));
}

std::string read_file(const std::string& path, size_t max_bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("failed to read '", path, "': ", std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat st {};
  if (fstat(fd, &st) != 0) fail("failed to read '", path, "': ", std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail("failed to read '", path, "': not a regular file");
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes)
    fail("failed to read '", path, "': the file is ", size, " bytes, larger than the limit of ", max_bytes, " bytes");
  std::string bytes(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n = read(fd, bytes.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("failed to read '", path, "': ", std::strerror(errno));
    if (n == 0) fail("failed to read '", path, "': the file ended after ", done, " of ", size, " bytes");
    done += static_cast<size_t>(n);
  }
  return bytes;
}

}  // namespace gmlp
