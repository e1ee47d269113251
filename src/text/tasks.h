// Finetuning tasks built from the KJV on the chapter split (corpus.h):
//   ot_nt       one verse -> Old (0) or New (1) Testament                          2 classes
//   genre       one verse -> the genre of its book (Genre's order, law = 0)        7 classes
//   next_verse  a pair (A, B) -> 1 if B is the verse right after A in its chapter,
//               0 if B is a random other verse of the same book                    2 classes
// Inputs are "[CLS] A [SEP]" or "[CLS] A [SEP] B [SEP]", truncated and padded with [PAD] to a
// fixed length, the layout BERT's finetuning uses (without segment ids).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/corpus.h"
#include "text/tokenizer.h"

namespace gmlp::text {

struct Example {
  std::vector<int32_t> ids;  // seq_len ids
  int label;
  bool operator==(const Example&) const = default;
};

enum class Task { ot_nt, genre, next_verse };
const char* task_name(Task t);           // "ot-nt", "genre", "next-verse"
Task parse_task(std::string_view name);  // throws gmlp::Error naming the accepted names
int num_classes(Task t);                 // 2, 7, 2
bool is_pair(Task t);                    // next-verse: "[CLS] a [SEP] b [SEP]"
std::vector<std::string> class_names(Task t);

// "[CLS] a [SEP]" with a cut to seq_len - 2 ids, then [PAD] up to seq_len (>= 3).
std::vector<int32_t> single_segment(const std::vector<int32_t>& a, int seq_len);
// "[CLS] a [SEP] b [SEP]" padded to seq_len (>= 5). While the pair is too long, the longer
// segment loses its last id (b when they are equal: Hugging Face's "longest_first").
std::vector<int32_t> segment_pair(std::vector<int32_t> a, std::vector<int32_t> b, int seq_len);

// One example per verse of `split`, in Bible order.
std::vector<Example> ot_nt(const std::vector<Verse>& verses, const Tokenizer& tok, Split split, int seq_len);
std::vector<Example> genre(const std::vector<Verse>& verses, const Tokenizer& tok, Split split, int seq_len);

// For each verse A of `split` that has a successor in its chapter, in Bible order: the positive
// (A, successor) with label 1, then the negative (A, B) with label 0, B drawn uniformly (from
// Rng(seed), deterministically) among the verses of the same book and the same split other than
// A and its successor, so no text of another split enters an example. A verse whose book has no
// such B in the split is left out with its positive, so the classes are always exactly 1:1.
// `verses` must be the whole KJV in order (load_kjv()).
std::vector<Example> next_verse(const std::vector<Verse>& verses, const Tokenizer& tok, Split split, int seq_len,
                                uint64_t seed);

// Dispatches to the builders above (seed is used by next_verse only).
std::vector<Example> build_task(Task t, const std::vector<Verse>& verses, const Tokenizer& tok, Split split,
                                int seq_len, uint64_t seed);

// The training examples of one epoch: build_task's on the train split; with limit > 0 a random
// `limit` of them, the same every epoch (fixed by seed). A pair task's negatives are drawn afresh
// each epoch (epoch e draws from seed + e; epoch 0 is build_task's own), the positives kept, as
// BERT's next-sentence data does: a fixed draw can be learned by heart over several epochs.
std::vector<Example> training_examples(Task t, const std::vector<Verse>& verses, const Tokenizer& tok, int seq_len,
                                       uint64_t seed, int epoch, int64_t limit);

}  // namespace gmlp::text
