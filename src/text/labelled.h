// Labelled texts from a user's own file, for gmlp finetune --train/--dev/--test: TSV or CSV with a
// header row naming the columns, or JSON Lines (one object per line), told apart by the file's
// extension (.tsv, .csv, .jsonl). Each row gives a text, optionally a second text (a pair), and a
// label, kept as a string; the classes are the training file's labels, sorted.
#pragma once

#include <string>
#include <vector>

#include "text/tasks.h"
#include "text/tokenizer.h"

namespace gmlp::text {

struct LabelledColumns {
  std::string text = "text";  // the text column
  std::string pair;           // the second text's column ("": single texts)
  std::string label = "label";
};

struct LabelledRow {
  std::string text, pair, label;
  int64_t line = 0;  // its line in the file, from 1 (the header is line 1 of TSV and CSV)
};

// Every row of `path`. A bad file (unknown extension, a missing column, a row with another number
// of fields than the header, an empty text or label, a malformed JSON line, no rows) throws a
// one-line gmlp::Error naming the file and line, what was expected and what was found.
std::vector<LabelledRow> read_labelled(const std::string& path, const LabelledColumns& columns);

// The labels of rows, sorted and without repeats.
std::vector<std::string> label_set(const std::vector<LabelledRow>& rows);

// The rows as examples laid out as single_segment or segment_pair lays them out, the label as
// its index in `classes`; a label not in `classes` throws naming the file, the line and the
// classes.
std::vector<Example> labelled_examples(const std::vector<LabelledRow>& rows, const std::vector<std::string>& classes,
                                       const Tokenizer& tok, int seq_len, const std::string& path);

}  // namespace gmlp::text
