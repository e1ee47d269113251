// Whole-file reads and atomic writes with POSIX calls; every call is checked and a failure is
// one gmlp::Error sentence naming the path and strerror(errno).
#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace gmlp {

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
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size())
    bail("write");
  if (std::fflush(f) != 0) bail("flush");
  if (fsync(fileno(f)) != 0) bail("fsync");
  const int closed = std::fclose(f);
  f = nullptr;
  if (closed != 0) bail("close");
  if (std::rename(tmp.c_str(), path.c_str()) != 0) bail("rename");
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
    fail("failed to read '", path, "': the file is ", size, " bytes, larger than the limit of ",
         max_bytes, " bytes");
  std::string bytes(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n = read(fd, bytes.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("failed to read '", path, "': ", std::strerror(errno));
    if (n == 0)
      fail("failed to read '", path, "': the file ended after ", done, " of ", size, " bytes");
    done += static_cast<size_t>(n);
  }
  return bytes;
}

}  // namespace gmlp
