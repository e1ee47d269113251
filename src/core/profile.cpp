#include "core/profile.h"

#include <map>
#include <mutex>

namespace gmlp::profile {

namespace {
std::atomic<bool> g_on{false};
std::mutex g_mu;
std::vector<Entry> g_entries;
std::map<std::string, size_t> g_index;
}  // namespace

void enable(bool on) { g_on.store(on, std::memory_order_relaxed); }
bool enabled() { return g_on.load(std::memory_order_relaxed); }

void reset() {
  std::lock_guard lock(g_mu);
  g_entries.clear();
  g_index.clear();
}

void add(const char* name, double seconds) {
  std::lock_guard lock(g_mu);
  auto [it, fresh] = g_index.try_emplace(name, g_entries.size());
  if (fresh) g_entries.push_back({name, 0.0, 0});
  g_entries[it->second].seconds += seconds;
  g_entries[it->second].calls += 1;
}

std::vector<Entry> entries() {
  std::lock_guard lock(g_mu);
  return g_entries;
}

}  // namespace gmlp::profile
