#include "io/writable.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace gmlp {

namespace fs = std::filesystem;

namespace {

// Creates and removes a temporary file in the existing folder `dir`.
void probe(const fs::path& dir) {
  std::string name = (dir / ".gmlp-probe-XXXXXX").string();
  const int fd = mkstemp(name.data());
  if (fd < 0) fail("cannot create a file in '", dir.string(), "': ", std::strerror(errno));
  close(fd);
  unlink(name.c_str());
}

}  // namespace

void check_writable_file(const std::string& path) {
  std::error_code ec;
  if (path.empty()) fail("expected a file name, found an empty path");
  if (fs::is_directory(path, ec)) fail("'", path, "' is a folder, expected a file name");
  const fs::path parent = fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  if (!fs::exists(parent, ec)) fail("its folder '", parent.string(), "' does not exist");
  if (!fs::is_directory(parent, ec)) fail("'", parent.string(), "' is not a folder");
  probe(parent);
}

void check_writable_folder(const std::string& dir) {
  std::error_code ec;
  if (dir.empty()) fail("expected a folder name, found an empty path");
  fs::path p = fs::absolute(dir, ec);
  if (ec) fail("cannot resolve '", dir, "': ", ec.message());
  // The nearest part of the path that exists: the folder itself, or where it will be created.
  while (!fs::exists(p, ec) && p.has_parent_path() && p.parent_path() != p) p = p.parent_path();
  if (!fs::is_directory(p, ec))
    fail("'", p.string(), "' is ", fs::exists(p, ec) ? "a file" : "missing", ", expected a folder");
  probe(p);
}

}  // namespace gmlp
