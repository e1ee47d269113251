// A per-op wall-clock profile of forward and backward, off by default. When on, every
// ProfileScope adds its elapsed time to a named bucket; `gmlp bench --profile` prints the table.
// The check when off is one relaxed load, so the scopes stay in the code.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

namespace gmlp::profile {

void enable(bool on);
bool enabled();
void reset();
void add(const char* name, double seconds);

struct Entry {
  std::string name;
  double seconds;
  long calls;
};
std::vector<Entry> entries();  // in first-seen order

class Scope {
 public:
  explicit Scope(const char* name) : name_(enabled() ? name : nullptr) {
    if (name_) start_ = std::chrono::steady_clock::now();
  }
  ~Scope() {
    if (name_) add(name_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  const char* name_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace gmlp::profile
