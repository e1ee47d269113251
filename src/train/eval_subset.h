// The items a limited evaluation reads (--eval-limit of train, compare, eval, pretrain and
// finetune): `limit` of a split's `total` drawn at random without replacement, fixed by the
// seed. A run evaluates the same subset every epoch and after --resume, so its curves compare,
// and `gmlp eval --eval-limit N --seed S` finds the images `train --eval-limit N --seed S`
// evaluated on. A split's first items are no sample of it: the KJV's tasks come in Bible order,
// an image folder in class order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gmlp {

// Indices into 0 .. total-1, ascending (the split's own order). limit <= 0 or limit >= total:
// all of them. The draw is a prefix of one seeded permutation, so a larger limit's subset holds
// a smaller one's.
std::vector<int64_t> eval_subset(int64_t total, int64_t limit, uint64_t seed);

// The same for a classification split, stratified: each class's share of the subset is its share
// of the split (the remainders go to the classes with the largest fractional shares, ties to the
// lower class), and a class's items are a uniform draw among its own. labels[i] is item i's class.
std::vector<int64_t> eval_subset(const std::vector<int>& labels, int64_t limit, uint64_t seed);

// Keeps the items of v at `indices` (ascending), in their order.
template <class T>
void keep_items(std::vector<T>& v, const std::vector<int64_t>& indices) {
  if (indices.size() == v.size()) return;  // all of them
  std::vector<T> kept;
  kept.reserve(indices.size());
  for (int64_t i : indices) kept.push_back(std::move(v[size_t(i)]));
  v = std::move(kept);
}

// Keeps the items of v at eval_subset(v.size(), limit, seed), in their order.
template <class T>
void keep_eval_subset(std::vector<T>& v, int64_t limit, uint64_t seed) {
  keep_items(v, eval_subset(int64_t(v.size()), limit, seed));
}

// n with thousands separators: "10,000".
std::string thousands(int64_t n);

// How much of a split an evaluation reads, for its report: "2,000 of 10,000" when a subset,
// "" when the whole split.
std::string subset_label(int64_t count, int64_t total);

// The note a run prints when --eval-limit is at least the split's size (`what`: "test
// images"), so the whole split is evaluated; "" otherwise.
std::string eval_limit_note(int64_t limit, int64_t total, const std::string& what);

}  // namespace gmlp
