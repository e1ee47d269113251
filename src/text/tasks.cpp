#include "text/tasks.h"

#include <algorithm>

#include "core/error.h"
#include "core/rng.h"

namespace gmlp::text {

namespace {

using T = Tokenizer;

template <class Label>
std::vector<Example> per_verse(const std::vector<Verse>& verses, const Tokenizer& tok, Split split, int seq_len,
                               Label label) {
  if (seq_len < 3) fail("failed to build a task: expected a sequence length >= 3, found ", seq_len);
  std::vector<Example> out;
  for (const Verse& v : verses)
    if (kjv_split(v.chapter_index) == split) out.push_back({single_segment(tok.encode(v.text), seq_len), label(v)});
  return out;
}

}  // namespace

const char* task_name(Task t) {
  switch (t) {
    case Task::ot_nt: return "ot-nt";
    case Task::genre: return "genre";
    case Task::next_verse: return "next-verse";
  }
  return "?";
}

Task parse_task(std::string_view name) {
  for (Task t : {Task::ot_nt, Task::genre, Task::next_verse})
    if (name == task_name(t)) return t;
  fail("unknown task '", name, "' (expected 'ot-nt', 'genre' or 'next-verse')");
}

int num_classes(Task t) { return t == Task::genre ? kNumGenres : 2; }

bool is_pair(Task t) { return t == Task::next_verse; }

std::vector<std::string> class_names(Task t) {
  switch (t) {
    case Task::ot_nt: return {testament_name(Testament::old_testament), testament_name(Testament::new_testament)};
    case Task::genre: {
      std::vector<std::string> names;
      names.reserve(kNumGenres);
      for (int g = 0; g < kNumGenres; ++g) names.push_back(genre_name(Genre(g)));
      return names;
    }
    case Task::next_verse: return {"not next", "next"};
  }
  return {};
}

std::vector<int32_t> single_segment(const std::vector<int32_t>& a, int seq_len) {
  if (seq_len < 3) fail("failed to build an example: expected a sequence length >= 3, found ", seq_len);
  std::vector<int32_t> ids;
  ids.reserve(size_t(seq_len));
  ids.push_back(T::kCls);
  ids.insert(ids.end(), a.begin(), a.begin() + std::min<ptrdiff_t>(ptrdiff_t(a.size()), seq_len - 2));
  ids.push_back(T::kSep);
  ids.resize(size_t(seq_len), T::kPad);
  return ids;
}

std::vector<int32_t> segment_pair(std::vector<int32_t> a, std::vector<int32_t> b, int seq_len) {
  if (seq_len < 5) fail("failed to build an example: expected a sequence length >= 5 for a pair, found ", seq_len);
  const size_t room = size_t(seq_len - 3);
  while (a.size() + b.size() > room) (a.size() > b.size() ? a : b).pop_back();
  std::vector<int32_t> ids;
  ids.reserve(size_t(seq_len));
  ids.push_back(T::kCls);
  ids.insert(ids.end(), a.begin(), a.end());
  ids.push_back(T::kSep);
  ids.insert(ids.end(), b.begin(), b.end());
  ids.push_back(T::kSep);
  ids.resize(size_t(seq_len), T::kPad);
  return ids;
}

std::vector<Example> ot_nt(const std::vector<Verse>& verses, const Tokenizer& tok, Split split, int seq_len) {
  return per_verse(verses, tok, split, seq_len,
                   [](const Verse& v) { return book(v.book).testament == Testament::new_testament ? 1 : 0; });
}

std::vector<Example> genre(const std::vector<Verse>& verses, const Tokenizer& tok, Split split, int seq_len) {
  return per_verse(verses, tok, split, seq_len, [](const Verse& v) { return int(book(v.book).genre); });
}

std::vector<Example> next_verse(const std::vector<Verse>& verses, const Tokenizer& tok, Split split, int seq_len,
                                uint64_t seed) {
  if (seq_len < 5) fail("failed to build a task: expected a sequence length >= 5 for a pair, found ", seq_len);
  // The verses of each book in this split, by index into `verses`.
  std::vector<std::vector<size_t>> pool(kNumBooks);
  for (size_t i = 0; i < verses.size(); ++i) {
    const Verse& v = verses[i];
    if (v.book < 0 || v.book >= kNumBooks)
      fail("failed to build a task: verse ", i, " has book index ", v.book, " (expected 0..65)");
    if (kjv_split(v.chapter_index) == split) pool[size_t(v.book)].push_back(i);
  }
  std::vector<std::vector<int32_t>> cache(verses.size());
  std::vector<bool> cached(verses.size(), false);
  auto ids = [&](size_t i) -> const std::vector<int32_t>& {
    if (!cached[i]) cache[i] = tok.encode(verses[i].text), cached[i] = true;
    return cache[i];
  };

  Rng rng(seed);
  std::vector<Example> out;
  for (const auto& books_verses : pool) {
    for (const size_t a : books_verses) {
      const size_t next = a + 1;
      if (next >= verses.size() || verses[next].chapter_index != verses[a].chapter_index ||
          verses[next].verse != verses[a].verse + 1)
        continue;
      // a and next are both in this pool (same chapter, so same split and book).
      if (books_verses.size() < 3) continue;
      size_t b;
      do {
        b = books_verses[rng.below(books_verses.size())];
      } while (b == a || b == next);
      out.push_back({segment_pair(ids(a), ids(next), seq_len), 1});
      out.push_back({segment_pair(ids(a), ids(b), seq_len), 0});
    }
  }
  return out;
}

std::vector<Example> build_task(Task t, const std::vector<Verse>& verses, const Tokenizer& tok, Split split,
                                int seq_len, uint64_t seed) {
  switch (t) {
    case Task::ot_nt: return ot_nt(verses, tok, split, seq_len);
    case Task::genre: return genre(verses, tok, split, seq_len);
    case Task::next_verse: return next_verse(verses, tok, split, seq_len, seed);
  }
  fail("unknown task");
}

std::vector<Example> training_examples(Task t, const std::vector<Verse>& verses, const Tokenizer& tok, int seq_len,
                                       uint64_t seed, int epoch, int64_t limit) {
  const uint64_t draw = is_pair(t) ? seed + uint64_t(epoch) : seed;
  std::vector<Example> set = build_task(t, verses, tok, Split::train, seq_len, draw);
  if (limit > 0 && int64_t(set.size()) > limit) {
    // The tasks come in book order: a subset must be drawn, not cut from the front. The
    // permutation depends on the size only, so every epoch keeps the same positives.
    Rng(seed ^ 0x5eedULL).shuffle(set);
    set.resize(size_t(limit));
  }
  return set;
}

}  // namespace gmlp::text
