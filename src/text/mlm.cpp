#include "text/mlm.h"

#include <algorithm>

#include "core/error.h"
#include "text/tokenizer.h"

namespace gmlp::text {

namespace {
using T = Tokenizer;
bool reserved(int32_t id) { return id >= 0 && id < T::kNumReserved; }
}  // namespace

std::vector<std::vector<int32_t>> pack_sequences(const std::vector<std::vector<int32_t>>& docs, int seq_len) {
  if (seq_len < 2) fail("failed to pack sequences: expected a sequence length >= 2, found ", seq_len);
  std::vector<std::vector<int32_t>> out;
  std::vector<int32_t> cur;
  auto push = [&](int32_t id) {
    if (cur.empty()) {
      cur.reserve(size_t(seq_len));
      cur.push_back(T::kCls);
    }
    cur.push_back(id);
    if (cur.size() == size_t(seq_len)) out.push_back(std::move(cur)), cur.clear();
  };
  for (size_t d = 0; d < docs.size(); ++d) {
    if (docs[d].empty()) continue;
    for (const int32_t id : docs[d]) {
      if (reserved(id) && id != T::kUnk)
        fail("failed to pack sequences: document ", d, " holds the reserved id ", id, " (", T::kReservedPieces[id],
             ")");
      push(id);
    }
    push(T::kSep);
  }
  if (!cur.empty()) {
    cur.resize(size_t(seq_len), T::kPad);
    out.push_back(std::move(cur));
  }
  return out;
}

void short_sequence(const std::vector<std::vector<int32_t>>& docs, size_t first, int length, int seq_len,
                    int32_t* out) {
  if (first >= docs.size()) fail("failed to make a short sequence: document ", first, " of ", docs.size());
  if (length < 2 || length > seq_len)
    fail("failed to make a short sequence: expected a length in [2, ", seq_len, "], found ", length);
  std::fill(out, out + seq_len, T::kPad);
  out[0] = T::kCls;
  int n = 1;
  for (size_t d = first; d < docs.size() && n < seq_len; ++d) {
    const int size = int(docs[d].size());
    if (d > first && n + size + 1 > length) break;
    const int take = std::min(size, seq_len - n);
    std::copy(docs[d].begin(), docs[d].begin() + take, out + n);
    n += take;
    if (n < seq_len) out[n++] = T::kSep;
  }
}

std::vector<Example> next_sentence_pairs(const std::vector<std::vector<int32_t>>& docs, const std::vector<int>& unit,
                                         const std::vector<int>& group, int seq_len, Rng& rng) {
  const size_t n = docs.size();
  if (unit.size() != n || group.size() != n)
    fail("failed to build next-sentence pairs: ", n, " documents but ", unit.size(), " units and ", group.size(),
         " groups");
  if (seq_len < 5) fail("failed to build next-sentence pairs: expected a sequence length >= 5, found ", seq_len);
  for (size_t d = 0; d < n; ++d) {
    if (d > 0 && unit[d] == unit[d - 1] && group[d] != group[d - 1])
      fail("failed to build next-sentence pairs: unit ", unit[d], " spans groups ", group[d - 1], " and ", group[d]);
    for (const int32_t id : docs[d])
      if (reserved(id) && id != T::kUnk)
        fail("failed to build next-sentence pairs: document ", d, " holds the reserved id ", id, " (",
             T::kReservedPieces[id], ")");
  }
  // Each document's group as the range [first, last) of documents sharing it.
  std::vector<size_t> group_first(n), group_last(n);
  for (size_t d = 0; d < n;) {
    size_t e = d;
    while (e < n && group[e] == group[d]) ++e;
    for (size_t k = d; k < e; ++k) group_first[k] = d, group_last[k] = e;
    d = e;
  }
  const size_t target = size_t(seq_len - 3);
  auto append = [](std::vector<int32_t>& to, const std::vector<int32_t>& from) {
    to.insert(to.end(), from.begin(), from.end());
  };
  std::vector<Example> out;
  for (size_t i = 0; i < n;) {
    size_t j = i, len = 0;
    while (j < n && unit[j] == unit[i] && (len < target || j - i < 2)) len += docs[j++].size();
    if (j - i < 2) {  // a unit's single last document
      i = j;
      continue;
    }
    const size_t a_end = i + 1 + size_t(rng.below(j - i - 1));
    std::vector<int32_t> a, b;
    for (size_t d = i; d < a_end; ++d) append(a, docs[d]);
    const size_t others = (group_last[i] - group_first[i]) - (j - i);
    int label = 1;
    if (rng.uniform() < 0.5 && others > 0) {
      label = 0;
      size_t r = group_first[i] + size_t(rng.below(others));
      if (r >= i) r += j - i;  // skip the chunk itself
      for (size_t d = r; d < n && unit[d] == unit[r] && (d == r || a.size() + b.size() < target); ++d)
        append(b, docs[d]);
    } else {
      for (size_t d = a_end; d < j; ++d) append(b, docs[d]);
    }
    out.push_back({segment_pair(std::move(a), std::move(b), seq_len), label});
    i = j;
  }
  return out;
}

void mask_tokens(const int32_t* ids, int32_t* inputs, int32_t* labels, int64_t n, int vocab_size, const MaskConfig& cfg,
                 Rng& rng) {
  auto prob_ok = [](float p) { return p >= 0.0f && p <= 1.0f; };
  if (!prob_ok(cfg.mask_prob) || !prob_ok(cfg.replace_mask) || !prob_ok(cfg.replace_random) ||
      double(cfg.replace_mask) + double(cfg.replace_random) > 1.0)
    fail(
        "failed to mask tokens: expected probabilities in [0, 1] with replace_mask + "
        "replace_random <= 1, found mask_prob ",
        cfg.mask_prob, ", replace_mask ", cfg.replace_mask, ", replace_random ", cfg.replace_random);
  if (vocab_size <= T::kNumReserved)
    fail("failed to mask tokens: expected a vocabulary larger than the ", T::kNumReserved, " reserved symbols, found ",
         vocab_size);
  const double p_sel = cfg.mask_prob, p_mask = cfg.replace_mask,
               p_rand = double(cfg.replace_mask) + double(cfg.replace_random);
  const uint64_t n_random = uint64_t(vocab_size - T::kNumReserved);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= vocab_size)
      fail("failed to mask tokens: id ", id, " at position ", i, " is outside the vocabulary of ", vocab_size);
    inputs[i] = id;
    labels[i] = kIgnoreLabel;
    if (reserved(id) || !(rng.uniform() < p_sel)) continue;
    labels[i] = id;
    const double u = rng.uniform();
    if (u < p_mask)
      inputs[i] = T::kMask;
    else if (u < p_rand)
      inputs[i] = T::kNumReserved + int32_t(rng.below(n_random));
  }
}

}  // namespace gmlp::text
