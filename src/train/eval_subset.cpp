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

std::vector<int64_t> eval_subset(const std::vector<int>& labels, int64_t limit, uint64_t seed) {
  const int64_t total = int64_t(labels.size());
  if (limit <= 0 || limit >= total) return eval_subset(total, limit, seed);
  std::vector<std::vector<int64_t>> by_class;
  for (int64_t i = 0; i < total; ++i) {
    const size_t c = size_t(std::max(labels[size_t(i)], 0));
    if (c >= by_class.size()) by_class.resize(c + 1);
    by_class[c].push_back(i);
  }
  // Quotas by largest remainder: floor(limit·n_c/total), then one more to the largest fractions.
  std::vector<int64_t> quota(by_class.size());
  std::vector<std::pair<int64_t, size_t>> remainder;  // (limit·n_c mod total, class)
  int64_t given = 0;
  for (size_t c = 0; c < by_class.size(); ++c) {
    const int64_t share = limit * int64_t(by_class[c].size());
    quota[c] = share / total, given += quota[c];
    remainder.push_back({share % total, c});
  }
  std::stable_sort(remainder.begin(), remainder.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < limit; ++k, ++given) ++quota[remainder[k].second];
  std::vector<int64_t> items;
  for (size_t c = 0; c < by_class.size(); ++c)
    if (quota[c] > 0)  // (a limit of 0 would mean all of the class)
      for (int64_t j : eval_subset(int64_t(by_class[c].size()), quota[c], seed + 0x9E3779B97F4A7C15ull * (c + 1)))
        items.push_back(by_class[c][size_t(j)]);
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
