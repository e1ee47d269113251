// What a training run checks before it reads or writes anything, and while it runs:
// validate_options refuses an option out of its range with one line naming the flag, what it
// expects and what it found (the command line's validators check the same ranges as it parses;
// these catch what reaches the library otherwise: a preset's defaults, a resumed run's saved
// options, a caller of the library); DivergenceGuard stops a run whose loss has blown up.
#pragma once

#include <cstdint>

#include "train/lm_trainer.h"
#include "train/trainer.h"

namespace gmlp {

// Throws gmlp::Error "invalid --lr nan: expected a finite number >= 0". validate_run_options
// checks what every command shares (loop.h), the others each command's own options besides.
void validate_run_options(const RunOptions& options);
void validate_options(const TrainOptions& options);
// finetune: finetune's options (--init, --task, --seq-len, ...) rather than pretrain's.
void validate_options(const LmOptions& options, bool finetune);

// A loss over kFactor times the first step's (or 1, if that is larger: cross-entropy starts near
// ln K, 2.3 for 10 classes, 9 for 8,000 tokens) is no run that learns: it has diverged, and
// finishing it would only save a broken model. (At --lr 10 the image loss passes 1,000 within
// an epoch; a healthy run's spikes stay within a few times its start.)
class DivergenceGuard {
 public:
  static constexpr double kFactor = 100;
  explicit DivergenceGuard(double lr) : lr_(lr) {}
  // The mean loss of step `step`; throws gmlp::Error naming --lr when it is not finite or
  // exceeds kFactor times the first step's.
  void check(double loss, int64_t step);

 private:
  double lr_, first_ = -1;
};

}  // namespace gmlp
