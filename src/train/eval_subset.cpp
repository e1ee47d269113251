#include "train/eval_subset.h"

#include <algorithm>
#include <numeric>

#include "core/rng.h"

namespace gmlp {

std::vector<int64_t> eval_subset(int64_t total, int64_t limit, uint64_t seed) {
  std::vector<int64_t> items(size_t(std::max<int64_t>(total, 0)));
  std::iota(items.begin(), items.end(), int64_t{0});
  if (limit <= 0 || limit >= total) return items;
  // The first `limit` steps of a Fisher-Yates shuffle: a uniform draw without replacement. The
  // stream is the seed's own, apart from initialisation's and the epochs' (run_files.h).
  Rng rng(seed ^ 0xE7A15B5E7ull);
  for (int64_t i = 0; i < limit; ++i)
    std::swap(items[size_t(i)], items[size_t(i + int64_t(rng.below(uint64_t(total - i))))]);
  items.resize(size_t(limit));
  std::sort(items.begin(), items.end());
  return items;
}

std::string thousands(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string subset_label(int64_t count, int64_t total) {
  return count < total ? thousands(count) + " of " + thousands(total) : "";
}

std::string eval_limit_note(int64_t limit, int64_t total, const std::string& what) {
  if (limit <= 0 || limit < total) return "";
  return "--eval-limit " + std::to_string(limit) + " is at least the split's " + thousands(total) + " " + what +
         ": evaluating on all of them";
}

}  // namespace gmlp
