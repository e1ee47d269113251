// Masked-language-model pretraining and finetuning on text (the KJV by default), with the image
// trainer's habits: AdamW with warmup + cosine, clipping, a progress line, atomic per-epoch
// checkpoints, metrics.jsonl, and --resume that continues bit-identically.
//
//   pretrain   packs the train split into fixed-length sequences, masks 15 % of tokens (BERT's
//              80/10/10) afresh every epoch, and reports masked-token perplexity on the dev
//              split (fixed masks, so epochs compare). With nsp, the sequences are instead
//              BERT's next-sentence pairs (text::next_sentence_pairs, drawn afresh each epoch)
//              and a two-class head on [CLS] learns whether B follows A, its loss added to the
//              masked tokens'; the model gets segment embeddings, and dev reports both
//   finetune   starts from a pretrained checkpoint, adds a classification head on [CLS], and
//              trains one KJV task (ot-nt, genre, next-verse); dev and test accuracy per epoch.
//              With mlm_weight, the masked-token loss stays on as a regulariser: the task's
//              inputs are masked as in pretraining and both losses share one backward
//
// A text checkpoint holds the model (safetensors, F32), its TextConfig, and the SentencePiece
// tokenizer (base64 in the metadata), so one file is enough to run fill-mask or finetune.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "nn/text_model.h"
#include "text/tokenizer.h"
#include "train/trainer.h"

namespace gmlp {

// pretrain's and finetune's options: the shared ones (loop.h) with their defaults, and their own.
struct LmOptions : RunOptions {
  LmOptions() {
    out_dir = "runs/pretrain";
    batch_size = 32, lr = 1e-3, weight_decay = 0.01;
  }
  std::string corpus;  // plain text, one document per line (default: the KJV)
  std::string init;    // finetune: the pretrained checkpoint
  std::string task;    // finetune: ot-nt, genre or next-verse
  // finetune on the user's labelled files instead of a KJV task (text/labelled.h): train and dev
  // (test optional), and the columns (or JSON keys) of the text, a second text, the label.
  std::string train_file, dev_file, test_file;
  std::string text_column = "text", pair_column, label_column = "label";
  int vocab_size = 8000;     // pretrain: the SentencePiece vocabulary trained on the train split
  double layer_decay = 1.0;  // finetune: block i of L learns at layer_decay^(L-i) times the
                             // rate, the embeddings at ^(L+1), the head at 1 (1: off)
  double drop_path = 0;      // finetune: stochastic depth, the last block's rate, linear in
                             // depth from 0 (replaces the pretrained config's)
  double mlm_weight = 0;     // finetune: keep the masked-token loss beside the task's, this
                             // weighted, on inputs masked at mask_prob (0: off, clean inputs)
  double mask_prob = 0.15;
  // pretrain: the chance that a training sequence is replaced by a short one of whole documents,
  // "[CLS] d [SEP] ... [PAD]" (BERT's short_seq_prob; text/mlm.h), as a single text is read. Off
  // with --nsp, whose pairs are their own. A run saved before the option reads 0.
  double short_seq_prob = 0.1;
  // train_limit: pretrain, the first N training sequences; finetune, a random N examples fixed
  // by the seed. eval_limit: N dev/test sequences, pairs or examples.
  int seq_len = 0;                    // finetune: a shorter length than pretraining's (0: the same)
  std::string segments = "auto";      // finetune: segment embeddings on, off, or auto (on for pairs)
  bool nsp = false;                   // pretrain: BERT's next-sentence objective beside the masked tokens
  std::string nsp_negatives = "any";  // where its negatives' B comes from: anywhere in the split
                                      // (BERT's rule), or the same book ("book", next-verse's)

  nlohmann::json to_json() const;
  static LmOptions from_json(const nlohmann::json& j);
};

struct TextCheckpoint {
  TextConfig config;
  std::unique_ptr<TextModel<float>> model;
  std::unique_ptr<text::Tokenizer> tokenizer;
  std::map<std::string, std::string> metadata;
};

void save_text_checkpoint(const std::string& path, const TextModel<float>& model, const text::Tokenizer& tokenizer,
                          const std::map<std::string, std::string>& extra = {});
// Throws a one-line gmlp::Error naming the file if it is not a gmlp text checkpoint.
TextCheckpoint load_text_checkpoint(const std::string& path);

// Both take their run folder as train() does (run_dir.h): a new run refuses a folder that holds
// one unless `overwrite`; SIGINT or SIGTERM stops them between two steps with gmlp::Interrupted.
TrainResult pretrain(const TextConfig& config, const LmOptions& options, bool resume, bool overwrite = false);
TrainResult finetune(const LmOptions& options, bool resume, bool overwrite = false);

}  // namespace gmlp
