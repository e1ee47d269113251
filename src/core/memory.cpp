#include "core/memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>

#include "core/error.h"

namespace gmlp {

namespace {

// The number in a cgroup limit file; "max", a missing file or garbage: no limit.
int64_t read_limit(const char* path) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s) || s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 18)
    return std::numeric_limits<int64_t>::max();
  return std::stoll(s);
}

int64_t compute_limit() {
  int64_t limit = std::numeric_limits<int64_t>::max();
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) limit = int64_t(pages) * int64_t(page);
  limit = std::min(limit, read_limit("/sys/fs/cgroup/memory.max"));
  limit = std::min(limit, read_limit("/sys/fs/cgroup/memory/memory.limit_in_bytes"));
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
    limit = std::min<int64_t>(limit, int64_t(std::min<rlim_t>(as.rlim_cur, rlim_t(limit))));
  return limit;
}

}  // namespace

int64_t memory_limit_bytes() {
  static const int64_t limit = compute_limit();
  return limit;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) bytes /= 1024, ++u;
  char buf[48];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

void check_fits_in_memory(double bytes, const std::string& what, const std::string& hint) {
  const int64_t limit = memory_limit_bytes();
  if (bytes > double(limit))
    fail(what, " need ", format_bytes(bytes), ", more than the ", format_bytes(double(limit)),
         " of memory this process may use", hint);
}

}  // namespace gmlp
