#include "train/guards.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "core/error.h"
#include "text/corpus.h"
#include "text/tokenizer.h"

namespace gmlp {

namespace {

// A finite number in [lo, hi] (an open end when lo_open / hi_open), else "invalid --flag v:
// expected ...".
void need_real(double v, const char* flag, double lo, double hi, bool lo_open, bool hi_open, const char* note = "") {
  const bool ok = std::isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  if (ok) return;
  const std::string range = std::isinf(hi)
                                ? cat("a finite number ", lo_open ? "> " : ">= ", lo)
                                : cat("a number in ", lo_open ? "(" : "[", lo, ", ", hi, hi_open ? ")" : "]");
  fail("invalid ", flag, " ", v, ": expected ", range, note);
}

void need_whole(int64_t v, const char* flag, int64_t lo, int64_t hi, const char* note = "") {
  if (v >= lo && v <= hi) return;
  fail("invalid ", flag, " ", v, ": expected a whole number ",
       hi == INT32_MAX ? cat(">= ", lo) : cat("in ", lo, "..", hi), note);
}

constexpr double kInf = INFINITY;

}  // namespace

void validate_run_options(const RunOptions& o) {
  need_whole(o.epochs, "--epochs", 1, INT32_MAX);
  need_whole(o.batch_size, "--batch-size", 1, INT32_MAX);
  need_whole(o.grad_accum, "--grad-accum", 1, o.batch_size,
             " (at most --batch-size: micro-batches of at least one item)");
  if (o.batch_size % o.grad_accum != 0)
    fail("invalid --grad-accum ", o.grad_accum, ": expected a divisor of --batch-size ", o.batch_size,
         ", so that every micro-batch has as many items");
  need_real(o.lr, "--lr", 0, kInf, false, false);
  need_real(o.min_lr, "--min-lr", 0, o.lr, false, false, " (at most --lr: the cosine decays from --lr to it)");
  need_real(o.warmup_epochs, "--warmup-epochs", 0, double(o.epochs), false, false,
            " (at most --epochs: the warmup is part of the run)");
  need_real(o.weight_decay, "--weight-decay", 0, kInf, false, false);
  // AdamW scales each weight by 1 - lr * decay per step: at 1 or more it flips or zeroes them.
  if (!(o.lr * o.weight_decay < 1))
    fail("invalid --lr ", o.lr, " with --weight-decay ", o.weight_decay,
         ": AdamW scales the weights by 1 - lr x decay "
         "each step, so expected lr x decay below 1, found ",
         o.lr * o.weight_decay);
  need_real(o.clip_norm, "--clip-norm", 0, kInf, false, false, " (0: off)");
  need_whole(o.train_limit, "--train-limit", 0, INT32_MAX, " (0: all)");
  need_whole(o.eval_limit, "--eval-limit", 0, INT32_MAX, " (0: all)");
  if (o.precision != "f32" && o.precision != "bf16" && o.precision != "auto")
    fail("invalid --precision '", o.precision, "': expected f32, bf16 or auto");
}

void validate_options(const TrainOptions& o) {
  validate_run_options(o);
  need_real(o.label_smoothing, "--label-smoothing", 0, 1, false, true);
  need_whole(o.crop_padding, "--crop-padding", 0, 4096, " (0: off)");
  // Beta(α, α) below 0.001 draws only 0 or 1 (and a subnormal α overflows its log draw).
  for (const auto& [alpha, flag] : {std::pair{o.mixup_alpha, "--mixup"}, std::pair{o.cutmix_alpha, "--cutmix"}})
    if (alpha != 0) need_real(alpha, flag, 0.001, 1000, false, false, " (0: off)");
  need_real(o.mix_prob, "--mix-prob", 0, 1, false, false);
  need_real(o.switch_prob, "--switch-prob", 0, 1, false, false);
  need_real(o.erase_prob, "--random-erase", 0, 1, false, false);
  need_real(o.ema_decay, "--ema", 0, 1, false, true, " (0: off)");
}

void validate_options(const LmOptions& o, bool finetune) {
  validate_run_options(o);
  // Pretraining learns from the masked tokens only; finetuning masks for --mlm-weight's loss.
  need_real(o.mask_prob, "--mask-prob", 0, 1, true, false);
  if (!finetune) {
    need_real(o.short_seq_prob, "--short-seq-prob", 0, 1, false, false);
    if (o.nsp && o.short_seq_prob > 0)
      fail("--short-seq-prob is for masked-token pretraining: --nsp's pairs are their own (give 0 or leave it out)");
    need_whole(o.vocab_size, "--vocab-size", text::Tokenizer::kNumReserved + 1, 1000000);
    if (o.nsp_negatives != "any" && o.nsp_negatives != "book")
      fail("invalid --nsp-negatives '", o.nsp_negatives, "': expected any or book");
    if (!o.corpus.empty()) text::check_corpus_file(o.corpus);
    return;
  }
  // What to learn: a KJV task, or the user's files (train and dev, test optional).
  const bool files = !o.train_file.empty() || !o.dev_file.empty() || !o.test_file.empty();
  if (files && !o.task.empty()) fail("finetune takes --task (a KJV task) or --train and --dev (your files), not both");
  if (files && (o.train_file.empty() || o.dev_file.empty()))
    fail("finetune on your files needs --train and --dev (--test is optional)");
  if (!files && o.task != "ot-nt" && o.task != "genre" && o.task != "next-verse")
    fail("invalid --task '", o.task, "': expected ot-nt, genre or next-verse, or --train and --dev files");
  if (files && (o.text_column.empty() || o.label_column.empty()))
    fail("finetune on your files needs --text-column and --label-column to name columns");
  // [CLS] a [SEP] needs 3 ids, a pair's [CLS] a [SEP] b [SEP] 5; 0 keeps the pretrained length.
  const int shortest = o.task == "next-verse" || (files && !o.pair_column.empty()) ? 5 : 3;
  if (o.seq_len != 0) need_whole(o.seq_len, "--seq-len", shortest, 8192, " (0: the pretrained length)");
  if (o.segments != "auto" && o.segments != "on" && o.segments != "off")
    fail("invalid --segments '", o.segments, "': expected auto, on or off");
  need_real(o.layer_decay, "--layer-decay", 0, 1, true, false, " (1: off)");
  need_real(o.drop_path, "--drop-path", 0, 1, false, true);
  need_real(o.mlm_weight, "--mlm-weight", 0, kInf, false, false, " (0: off)");
}

void DivergenceGuard::check(double loss, int64_t step) {
  if (first_ < 0 && std::isfinite(loss)) first_ = loss;
  const double limit = kFactor * std::max(first_, 1.0);
  if (std::isfinite(loss) && loss <= limit) return;
  fail("training diverged at step ", step, ": the loss is ", loss,
       !std::isfinite(loss) ? std::string()
       : first_ >= 1        ? cat(", over ", kFactor, " times the first step's ", first_)
                            : cat(", over ", limit),
       " (lower --lr, now ", lr_, ", or cap the gradients with --clip-norm)");
}

}  // namespace gmlp
