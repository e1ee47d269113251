// Masked-language-model data: BERT-style packing of tokenized documents into fixed-length
// sequences, and BERT's masking (Devlin et al. 2019, §3.1 and appendix A.1; the semantics of
// Hugging Face's DataCollatorForLanguageModeling).
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "text/tasks.h"

namespace gmlp::text {

inline constexpr int kDefaultSeqLen = 128;
inline constexpr int32_t kIgnoreLabel = -100;  // label of a position the loss skips

// Packs documents (token ids without reserved symbols other than [UNK]) into sequences of
// exactly seq_len (>= 2) ids. The documents are read as one stream, each followed by [SEP]:
// doc0 [SEP] doc1 [SEP] doc2 [SEP] ...; the stream is cut into pieces of seq_len - 1 ids and
// each piece becomes a sequence "[CLS] piece", so a document longer than the room left in a
// sequence continues in the next one (which then starts "[CLS] rest-of-document"), and the last
// sequence is padded with [PAD]. Empty documents are skipped. Nothing is lost or reordered: the
// sequences without their [CLS] and trailing [PAD]s, concatenated, are the stream again.
// Throws gmlp::Error if seq_len < 2 or a document holds [PAD], [CLS], [SEP] or [MASK].
std::vector<std::vector<int32_t>> pack_sequences(const std::vector<std::vector<int32_t>>& docs,
                                                 int seq_len = kDefaultSeqLen);

// A short sequence of whole documents, BERT's short_seq_prob sequence (create_pretraining_data.py;
// Devlin et al. 2019, appendix A.2), in the shape a single text is read in ("[CLS] text [SEP]"
// padded): out (seq_len ids) = "[CLS] docs[first] [SEP] docs[first+1] [SEP] ... [PAD] ...", the
// documents from `first` on, in order, as many whole ones as fit in `length` ids, and always the
// first (cut at seq_len, without its [SEP], if it does not fit). Throws gmlp::Error if first is
// past the documents or length is outside [2, seq_len].
void short_sequence(const std::vector<std::vector<int32_t>>& docs, size_t first, int length, int seq_len, int32_t* out);

// BERT's next-sentence pretraining data (Devlin et al. 2019, §3.1, task #2; the shape of its
// create_pretraining_data.py): pairs "[CLS] A [SEP] B [SEP]" of seq_len ids, label 1 when B is the
// text right after A, 0 when B is text from elsewhere. docs are the documents in order (token ids
// without reserved symbols other than [UNK]); unit[d] says which run of consecutive text document
// d belongs to (KJV: its chapter; a pair never crosses one) and group[d] where its negatives come
// from (BERT: the whole corpus; the next-verse task's rule: the book); a unit lies inside one group.
//   The documents of each unit are cut, in order, into chunks of consecutive documents holding at
// least seq_len - 3 ids (or the unit's rest) and at least two documents; a unit's single last
// document is left out. Each chunk gives one pair: A is its first k documents, k uniform in
// [1, size - 1]; with probability 1/2 B is the chunk's remaining documents (label 1), else B
// starts at a uniformly random document of the same group outside the chunk and takes the
// documents after it in its unit up to the length (label 0; a group with no such document gives
// a positive). segment_pair trims the longer side to fit. The chunks, hence the number of pairs,
// do not depend on rng; which pairs are negative and their B do. Throws gmlp::Error on sizes that
// differ, a unit across groups, seq_len < 5, or a document holding [PAD], [CLS], [SEP] or [MASK].
std::vector<Example> next_sentence_pairs(const std::vector<std::vector<int32_t>>& docs, const std::vector<int>& unit,
                                         const std::vector<int>& group, int seq_len, Rng& rng);

struct MaskConfig {
  float mask_prob = 0.15f;      // share of eligible tokens selected for prediction
  float replace_mask = 0.8f;    // of the selected: replaced by [MASK]
  float replace_random = 0.1f;  // of the selected: replaced by a random non-reserved id
                                // (the rest, 0.1 by default, stay unchanged)
};

// BERT's masking of n token ids. Each position whose id is not reserved ([PAD], [UNK], [CLS],
// [SEP], [MASK]: ids 0..4, Hugging Face's special-tokens mask) is selected independently with
// probability mask_prob; a selected position gets labels[i] = ids[i] and inputs[i] = [MASK] with
// probability replace_mask, a uniformly random id in [5, vocab_size) with probability
// replace_random, else ids[i] (unchanged). Positions not selected get inputs[i] = ids[i] and
// labels[i] = kIgnoreLabel. inputs may alias ids. Deterministic given rng's state: one draw per
// eligible position, one more per selected one, and one per random replacement. Throws
// gmlp::Error on probabilities outside [0, 1], replace_mask + replace_random > 1,
// vocab_size <= 5, or an id outside [0, vocab_size).
void mask_tokens(const int32_t* ids, int32_t* inputs, int32_t* labels, int64_t n, int vocab_size, const MaskConfig& cfg,
                 Rng& rng);

}  // namespace gmlp::text
